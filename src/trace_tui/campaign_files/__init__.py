"""What a campaign directory holds, read without running anything: its state database and its shard
plan (below the engine that writes them and the verifier that checks them)."""
