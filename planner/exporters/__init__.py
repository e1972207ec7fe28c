"""Exporters: turn a written plan into what a scheduler enforces (Kueue, Slurm, JSON view)."""
