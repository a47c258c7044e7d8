import pathlib
import sys

# belljar_testing.py sits one level up, shared by every Python suite.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
