"""Analyses: functions of a run and the model's own readout (patching.py: activation patching)."""
