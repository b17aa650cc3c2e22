# Experiment: a TPU process's open and close, by TPU_PREMAPPED_BUFFER_SIZE (alternating runs).
for round in 1 2; do
  for v in default 268435456 67108864; do
    if [ "$v" = default ]; then unset TPU_PREMAPPED_BUFFER_SIZE; else export TPU_PREMAPPED_BUFFER_SIZE=$v; fi
    s=$(date +%s.%N)
    python3 -c "
import time; t=time.perf_counter(); import jax; i=time.perf_counter()
x=jax.numpy.ones((256,256)); y=(x@x).block_until_ready(); o=time.perf_counter()
import numpy as np; a=np.ones((1024,1024),np.float32); t1=time.perf_counter(); b=jax.device_put(a).block_until_ready(); t2=time.perf_counter()
print(f'import {i-t:.2f} open+first {o-i:.2f} put4MB {1e3*(t2-t1):.1f}ms', flush=True)" 2>/dev/null
    e=$(date +%s.%N)
    echo "premapped=$v round=$round process wall $(python3 -c "print(round($e-$s,2))")"
  done
done
