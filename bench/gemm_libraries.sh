#!/usr/bin/env bash
# Measures OpenBLAS, BLIS and oneDNN sgemm on the GEMM shapes of a gpt2-small layer,
# interleaved over several rounds (the second core is not always fully ours), and prints
# each library's GFLOP/s. This is how trident's GEMM backends were chosen: oneDNN on AVX-512
# CPUs, BLIS before them (CMakeLists.txt).
set -euo pipefail
cd "$(dirname "$0")"
ROUNDS=${ROUNDS:-3}
THREADS=${OMP_NUM_THREADS:-$(nproc)}
need=()
for p in libopenblas-openmp-dev libblis-openmp-dev libdnnl-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
out=$(mktemp -d)
ML=/usr/lib/x86_64-linux-gnu; MI=/usr/include/x86_64-linux-gnu
g++ -O2 -fopenmp -DTRIDENT_GEMM_OPENBLAS gemm_libraries.cpp -I$MI/openblas-openmp \
  $ML/openblas-openmp/libopenblas.so -o "$out/openblas"
g++ -O2 -fopenmp -DTRIDENT_GEMM_BLIS gemm_libraries.cpp -I$MI/blis-openmp \
  $ML/blis-openmp/libblis.so -o "$out/blis"
g++ -O2 -fopenmp -DTRIDENT_GEMM_DNNL gemm_libraries.cpp -ldnnl -o "$out/onednn"
for ((r = 1; r <= ROUNDS; r++)); do
  for lib in openblas blis onednn; do OMP_NUM_THREADS=$THREADS "$out/$lib" | tail -n +2; done
done > "$out/all.txt"
echo "threads: $THREADS, rounds: $ROUNDS; best GFLOP/s per library and shape"
sort -k1,1 -k2,3 "$out/all.txt" | awk '{key=$1" "$2" "$3; v=$NF; if (!(key in best) || v > best[key]) best[key]=v}
  END {for (k in best) print k, best[k]}' | sort | column -t
rm -rf "$out"
