# Sourced by the device scripts (env-gpu.sh, train-gpu.sh) after they set OUT: installs the carried wheels (.whl/),
# puts both packages and them on PYTHONPATH, sets the JAX and Python switches, records the GPU in $OUT/gpu.txt.
mkdir -p "$OUT"
PY=python3
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=$PWD:$PWD/packages/ers-deep/src:$PWD/packages/ers-exact/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null; $PY -c "import torch; print('torch', torch.__version__)"; } \
  | tee "$OUT/gpu.txt"
