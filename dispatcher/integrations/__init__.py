"""Drop-ins for serving engines."""
