# Sourced by the GPU machine's scripts (gpu_check.sh, and ad-hoc calls: `source scripts/gpu_env.sh; <command>`):
# installs the carried wheels of .whl (numpy 2.4: the image's numpy 2.5 breaks numba-cuda) into .site and puts
# them and the tree on PYTHONPATH; OUT defaults to /tmp/asyncpipe-out.
OUT=${OUT:-/tmp/asyncpipe-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target .site .whl/*.whl || return 1
  export PYTHONPATH=$PWD/.site:$PWD
else
  export PYTHONPATH=$PWD
fi
