"""Switchyard tuner: measures attention pipelines on this host and writes the store."""
