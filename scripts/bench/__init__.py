"""The benchmarks, one module each with `main(argv=None) -> int`, run by name through scripts/bench.py
(`.venv/bin/python scripts/bench.py` lists them); common.py, render.py, pyspy.py and the rest are what they share."""
