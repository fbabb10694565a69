"""The machine and the build: the runner doctor and the facts it reads from /proc, cgroups,
nvidia-smi (one reader, gpus.py) and the server's log (the model runner that served,
model_runner.py), the environment fingerprint, installing a vLLM build (and its precompiled
wheels, wheels.py; one commit's build as an overlay over an installed one), and the tiny
random-weight model the CPU path serves."""
