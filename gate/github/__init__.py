"""Talking to GitHub: the REST client, the sticky comment and its hand-over file, job
summary, outputs and annotations, workflow commands on stdout, and the run-time trust
checks before PR code reaches a self-hosted runner."""
