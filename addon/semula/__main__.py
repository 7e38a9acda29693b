from semula.cli import run

run()
