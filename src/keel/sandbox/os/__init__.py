"""Operating-system mechanisms (seccomp, Landlock, processes): no policy."""
