"""Modal dialogs the screens and widgets open (confirm, the Options form, the step list, a row's details):
a screen imports these, never another screen."""
