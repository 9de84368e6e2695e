# The sweep on a real single-node Slurm cluster (tests/slurm/sweep_on_slurm.py, python3): munged,
# slurmctld and slurmd from Debian's packages (scripts/setup), started as root under a temporary folder
# and stopped by pid; a job array from `attograd sweep --slurm`, one task cancelled and one killed, resumed
# to the tensors of an uninterrupted sweep. It tests the cluster integration, not memory: its label
# "integration" keeps it out of the sanitizer runs (scripts/test --sanitize).
add_test(NAME slurm/sweep_on_slurm
         COMMAND python3 ${PROJECT_SOURCE_DIR}/tests/slurm/sweep_on_slurm.py $<TARGET_FILE:attograd>)
# The script bounds the test to 200 s (every wait has its own timeout) and its clean-up to 95 s, below
# this one, so that it always stops its daemons.
set_tests_properties(slurm/sweep_on_slurm PROPERTIES LABELS integration TIMEOUT 300)
