import sys
from pathlib import Path

# Test helper modules (corpus.py, pcapgen.py) live beside the tests.
sys.path.insert(0, str(Path(__file__).resolve().parent))
