"""deploy/submission: the Network-division submission runner (see submit.py)."""
