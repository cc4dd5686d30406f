"""Chaos runs: the services as separate processes on the real broker and the test API server,
killed, doubled and starved by a fault schedule, judged by a checker that reads only the API server."""
