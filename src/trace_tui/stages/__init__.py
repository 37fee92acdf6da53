"""Stage workers: programs that run inside the stage images and speak the stage contract."""
