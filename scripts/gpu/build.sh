#!/usr/bin/env bash
# build.sh: prepare .gpu/ on the dev machine for a run on the GPU machine (which has no
# Go). Run from the repository root, then pass carry [".gpu/bin.tar.xz", ".gpu/bench",
# ".gpu/tests.txt"] to the device `run` (suite.sh unpacks the binaries there).
#
#   scripts/gpu/build.sh
#
# Produces (.gpu/ is git-ignored):
#   .gpu/bin/sublet          the CLI, CGO_ENABLED=0 GOOS=linux GOARCH=amd64
#   .gpu/bin/sublet-bench    the allocator measurements (cmd/sublet-bench)
#   .gpu/bin/ddp             the data-parallel example (examples/ddp), for ddp_scaling.sh
#   .gpu/bin/example-NAME    each program of examples/ that takes -device
#   .gpu/bin/PKG.test        test binary of each package in GPU_PKGS that has tests
#                            (PKG is the import path below the module, '/' -> '_')
#   .gpu/bin.tar.xz          all of .gpu/bin in one xz archive whose dictionary spans
#                            the whole tar (768 MiB, the tar being ~780 MB): the
#                            binaries share most of their bytes, so they pack to a
#                            fraction of what xz's default 8 MiB window gives, and fit
#                            the 64 MiB carry (256 MiB gave 32.8 MB, 768 MiB 29.0 MB on
#                            2026-12-06, when the tracked tree was 34.2 MB; ~8 minutes).
#                            XZ_PRESET (default 6e) trades size for time: 2 packed
#                            the same 906 MB of binaries into 34.8 MB in about 2
#                            minutes, for a call that leaves kernels/cuda/gen/*.ptx
#                            and *.fatbin behind (docs/gpu.md, "One command")
#   .gpu/tests.txt           one line per test binary: "PACKAGE_DIR BINARY"; the binary
#                            must run with PACKAGE_DIR as working directory (testdata)
#   .gpu/bench/              a copy of /work/shared/bench (PyTorch scripts)
#
# A package whose tests do not compile is reported and left out (exit status 1).
# GPU_PKGS (environment) lists the packages whose tests mean something on a GPU
# (default below); packages that do not exist yet are skipped with a note.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

GPU_PKGS=${GPU_PKGS:-"device/cuda device/named alloc alloc/pinned alloc/replay kernels kernels/cuda tensor safetensors tensor/gradcheck nn optim checkpoint amp dist dist/nccl examples/mlp examples/checkpoint examples/amp examples/leaks examples/leftover examples/multiprocess cmd/sublet"}
BENCH_SRC=${BENCH_SRC:-/work/shared/bench}
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
# stripped: the binaries travel within the 64 MiB carry limit
FLAGS=(-trimpath "-ldflags=-s -w")

# outputs of earlier builds and runs would travel too
rm -rf .gpu/bin .gpu/bin.tar.xz .gpu/bench .gpu/tests.txt .gpu/out .gpu/oracle-work .gpu/traces .gpu/suite
mkdir -p .gpu/bin
go build "${FLAGS[@]}" -o .gpu/bin/sublet ./cmd/sublet
go build "${FLAGS[@]}" -o .gpu/bin/sublet-bench ./cmd/sublet-bench
go build "${FLAGS[@]}" -o .gpu/bin/ddp ./examples/ddp
for ex in checkpoint multiprocess $(grep -l 'DeviceFlag(' examples/*/*.go | grep -v _test | xargs -n1 dirname | xargs -n1 basename | sort -u); do
	go build "${FLAGS[@]}" -o ".gpu/bin/example-$ex" "./examples/$ex"
done
: >.gpu/tests.txt
failed=""
for pkg in $GPU_PKGS; do
	if ! ls "$pkg"/*_test.go >/dev/null 2>&1; then
		echo "build.sh: $pkg has no tests (yet); skipped" >&2
		continue
	fi
	bin=.gpu/bin/${pkg//\//_}.test
	if go test -c "${FLAGS[@]}" -o "$bin" "./$pkg"; then
		echo "$pkg $bin" >>.gpu/tests.txt
	else
		failed="$failed $pkg"
	fi
done
cp -r "$BENCH_SRC" .gpu/bench
chmod -R u+w .gpu/bench
tar -C .gpu -cf - bin | xz -T1 --lzma2=preset=${XZ_PRESET:-6e},dict=768MiB >.gpu/bin.tar.xz
du -sh .gpu/bin.tar.xz .gpu/bench | awk '{print "build.sh: " $2 " is " $1}' >&2
echo "build.sh: carry .gpu/bin.tar.xz, .gpu/bench and .gpu/tests.txt (limit: 64 MiB with the working tree)" >&2
if [[ -n $failed ]]; then
	echo "build.sh: test binaries of$failed did not build; the rest are in .gpu/" >&2
	exit 1
fi
