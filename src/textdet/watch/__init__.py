"""What watches a training run beside its loop: logs and progress, ETA, phase timing, the start-up table,
the profiler window, TensorBoard, the health checks, the hang watchdog and the distributed pre-flight.
The loop calls it through one interface, ``watch.run.RunWatch``, at named events."""
