#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# One command for a GPU machine that has CUDA and CMake but no MPI and no
# network: unpacks the Debian MPI packages brought along, builds Veneer with
# CUDA against each MPI, and runs the device MPI tests, the kernel tests,
# halo3d on device memory and the device ping-pong at 1-2 ranks, with and
# without Veneer; then prints the ratio table (every method against the
# hand-packed workaround: 2-D device copies to pinned memory + contiguous
# sends). Every halo cell and every ping-pong point is verified. Exits
# non-zero if a build step, a test or a check fails.
#
#   bash bench/gpu/run_on_gpu_machine.sh --prepare
#       on a Debian 12 machine with Veneer's CI packages installed (before
#       going to the GPU machine): copies GoogleTest's sources and the .deb
#       files of Open MPI, MPICH, hwloc and what they need (from apt's cache,
#       else `apt-get download`) into build-gpu-carry/ (git-ignored). Carry
#       that folder along with the checkout.
#   bash bench/gpu/run_on_gpu_machine.sh [--quick]
#       on the GPU machine: everything above, per MPI found (installed, or
#       unpacked from build-gpu-carry/debs with dpkg -x). Without any MPI it
#       builds and runs the kernels alone (bench/gpu/standalone), as before.
#   bash bench/gpu/run_on_gpu_machine.sh --emulated [--quick] [--no-build]
#       the same on the emulated GPU of test/device, with no GPU and no CUDA
#       (a build with VENEER_EMULATED_GPU_BENCH=ON): what CI runs
#       (ctest -R gpu_script, with --no-build on CI's own build folder).
#       Correctness only: the emulator's timings mean nothing.
#   bash bench/gpu/run_on_gpu_machine.sh --host-collectives
#       on the GPU machine, its CPUs only: host collectives at 4-16 ranks,
#       one rank per core, with no oversubscription (what a 2-core machine
#       cannot time). Per MPI: a build without CUDA, `veneer-calibrate --max
#       1M` at 4 ranks (timed), the model check of application patterns
#       (--apps) at 16, 8 and 4 ranks on that profile, the application loop
#       (veneer-bench-loop) at 16 and 8 ranks, OSU's timing loop (--osu) at
#       16, the pass-through overhead at 2
#       ranks and the paired halo exchange at 1, 2 and 4 ranks (with and
#       without the profile, and a control without Veneer). Steps that would
#       start after VENEER_HOST_BUDGET seconds (default 540) are skipped;
#       VENEER_HOST_RANKS sets the checks' rank counts (default "16 8 4"; the
#       loop runs at the first two), VENEER_HOST_CALIBRATE the calibration's
#       arguments (default --max 1M).
#
# Environment: VENEER_GPU_BUILD (build folder; default build-gpu, one
# build-gpu-<mpi> per MPI), VENEER_GPU_MPI (openmpi, mpich or "openmpi mpich",
# default: each one present), VENEER_CUDA_ARCHITECTURES (default: the GPU's
# own, from nvidia-smi), VENEER_GPU_SANITIZE=1 (also run the kernel tests
# under compute-sanitizer), OUT (a folder for the CSVs, logs and XML).
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
carry=$root/build-gpu-carry

# --- --prepare: what to carry ------------------------------------------------
# The MPI packages and their dependency closure, less what a machine that
# builds CUDA code has anyway (priority required/important, the C library and
# the compilers) and what MPI does without here (fonts, X, perl, ssh).
mpi_packages=(openmpi-bin libopenmpi-dev mpich libmpich-dev libhwloc-dev hwloc pkg-config)
not_carried='^(libc6|libc-dev-bin|linux-libc-dev|libcrypt|gcc|g\+\+|cpp|gfortran|libgfortran-[0-9]+-dev|binutils|'
not_carried+='libbinutils|libctf|libgprofng|libstdc\+\+|libgcc|libasan|liblsan|libtsan|libubsan|libitm|libatomic|'
not_carried+='libquadmath|libgomp|libcc1|libisl|libmpc|libmpfr|libgmp|fonts-|fontconfig|libfont|libfreetype|libx11|'
not_carried+='libxau|libxcb|libxdmcp|libxext|libxrender|x11-|libcairo|libpixman|libpng|perl|libperl|openssh|'
not_carried+='libselinux|libsemanage|libsepol|libpam|libaudit|libcap-ng|libdb5|libgdbm|libicu|libz3|libedit|libbsd|'
not_carried+='libmd0|libtinfo|libreadline|readline-common|zlib1g|libzstd|liblzma|libbz2|libexpat|libffi|libssl|'
not_carried+='libkrb|libk5crypto|libgssapi|libkeyutils|libcom-err|libuuid|libacl1|lsb-base|install-info|cdebconf|'
not_carried+='ttf-|libslang|libfido|libcbor|libnsl|libtirpc|rpcsvc-proto|libjs-)'
if [[ ${1:-} == --prepare ]]; then
  src=${GTEST_SOURCE:-/usr/src/googletest}
  [[ -f $src/CMakeLists.txt ]] || { echo "no GoogleTest sources at $src (set GTEST_SOURCE)"; exit 1; }
  mkdir -p "$carry/debs"
  rm -rf "$carry/googletest"
  cp -r "$src" "$carry/googletest"
  echo "copied $src to $carry/googletest"
  mapfile -t closure < <(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "${mpi_packages[@]}" 2>/dev/null | grep -E '^[a-z0-9]' | sort -u)
  wanted=()
  for p in "${closure[@]}"; do
    # Installed here only: the others are virtual or the unused side of an alternative.
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || continue
    prio=$(dpkg-query -W -f='${Priority}' "$p")
    [[ $prio == required || $prio == important ]] && continue
    [[ $p =~ $not_carried ]] && continue
    wanted+=("$p")
  done
  missing=()
  for p in "${wanted[@]}"; do
    version=$(dpkg-query -W -f='${Version}' "$p" | sed 's/:/%3a/')
    arch=$(dpkg-query -W -f='${Architecture}' "$p")
    deb=/var/cache/apt/archives/${p}_${version}_${arch}.deb
    if [[ -f $deb ]]; then cp "$deb" "$carry/debs/"; else missing+=("$p=$(dpkg-query -W -f='${Version}' "$p")"); fi
  done
  if ((${#missing[@]})); then
    (cd "$carry/debs" && apt-get download "${missing[@]}") || { echo "apt-get download failed"; exit 1; }
  fi
  echo "copied $(ls "$carry/debs" | wc -l) .deb files to $carry/debs; carry build-gpu-carry to the GPU machine"
  exit 0
fi

emulated=0 quick=0 build_it=1 host=0
for a in "$@"; do
  case $a in
    --emulated) emulated=1 ;;
    --host-collectives) host=1 ;;
    --quick) quick=1 ;;
    --no-build) build_it=0 ;;
    *) echo "unknown argument $a (see the head of $0)"; exit 2 ;;
  esac
done
status=0
fail() { echo "!! $*"; status=1; }
results=${OUT:-${VENEER_GPU_BUILD:-$root/build-gpu}/results}
mkdir -p "$results"
multiarch=$( (gcc -print-multiarch || dpkg-architecture -qDEB_HOST_MULTIARCH) 2>/dev/null | head -1)
multiarch=${multiarch:-$(uname -m)-linux-gnu}

# --- MPI from the carried .deb files -----------------------------------------
# dpkg -x into build-gpu-carry/root, skipping packages the machine already has
# whole (its own libc and friends must win); the paths baked into the wrapper
# compilers, pkg-config files and Open MPI are pointed at the unpacked tree.

# Whether the machine has package $1 whole: dpkg calls it installed, and every
# file of the carried $2 is there (documentation aside, which images strip).
# On a GPU machine whose image registers part of another Open MPI, skipping
# the carried packages on dpkg's word alone left CMake without a usable MPI.
installed_whole() {  # PACKAGE DEB
  command -v dpkg-query >/dev/null && dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed" || return 1
  local f
  while read -r f; do
    f=/${f#./}
    [[ -e $f || -L $f ]] || return 1
  done < <(dpkg-deb --fsys-tarfile "$2" | tar -t | grep -v -E '/$|^\./usr/share/(doc|man|info|lintian|locale)/')
}

unpack_debs() {
  local r=$carry/root
  if [[ ! -f $r/.unpacked ]]; then
    echo "== unpacking $(ls "$carry"/debs/*.deb | wc -l) .deb files into $r"
    rm -rf "$r" && mkdir -p "$r"
    for deb in "$carry"/debs/*.deb; do
      pkg=$(dpkg-deb -f "$deb" Package 2>/dev/null || basename "$deb" | cut -d_ -f1)
      installed_whole "$pkg" "$deb" && continue
      dpkg-deb -x "$deb" "$r" || { echo "cannot unpack $deb"; return 1; }
    done
    # Text files that name /usr: MPICH's wrapper scripts, pkg-config files.
    grep -rlI --include='*.pc' --include='mpic*.mpich' --include='mpif*.mpich' -e '=/usr' -e '="/usr' \
      "$r/usr/bin" "$r/usr/lib" "$r/usr/share" 2>/dev/null |
      xargs -r sed -i -E "s#^([A-Za-z_]+)=(\"?)/usr#\1=\2$r/usr#"
    # Debian's alternatives are not run by dpkg -x: the plain names are missing.
    for tool in mpicc mpicxx mpirun mpiexec; do
      [[ -e $r/usr/bin/$tool.openmpi && ! -e $r/usr/bin/$tool ]] && ln -s "$tool.openmpi" "$r/usr/bin/$tool"
    done
    touch "$r/.unpacked"
  fi
  export PATH=$r/usr/bin:$PATH
  export LD_LIBRARY_PATH=$r/usr/lib/$multiarch:$r/usr/lib/$multiarch/openmpi/lib:$r/lib/$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_PATH=$r/usr/lib/$multiarch/pkgconfig:$r/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  if [[ -d $r/usr/lib/$multiarch/openmpi ]]; then
    export OPAL_PREFIX=$r/usr                      # Open MPI finds its components, help files and wrapper data
    export PMIX_INSTALL_PREFIX=$r/usr              # and PMIx its plugins
  fi
  [[ -d $r/usr/lib/$multiarch/hwloc ]] && export HWLOC_PLUGINS_PATH=$r/usr/lib/$multiarch/hwloc
  [[ -d $r/usr/lib/$multiarch/libfabric ]] && export FI_PROVIDER_PATH=$r/usr/lib/$multiarch/libfabric
  [[ -d $r/usr/lib/$multiarch/ucx ]] && export UCX_MODULE_DIR=$r/usr/lib/$multiarch/ucx
  return 0
}

# The MPIs to build against: each one whose wrapper compiler is there.
mpis_present() {
  local found=()
  command -v mpicc.openmpi >/dev/null && found+=(openmpi)
  command -v mpicc.mpich >/dev/null && found+=(mpich)
  # An MPI that is not Debian's (plain mpicc only): let CMake find it.
  ((${#found[@]} == 0)) && command -v mpicc >/dev/null && found+=(default)
  echo "${found[@]}"
}

# --- one build, and everything run on it --------------------------------------
configure_and_build() {  # DIR FLAVOUR
  local dir=$1 flavour=$2 args=(-DCMAKE_BUILD_TYPE=Release)
  command -v ninja >/dev/null && args+=(-G Ninja)
  [[ -d $carry/googletest ]] && args+=("-DVENEER_GTEST_SOURCE=$carry/googletest")
  case $flavour in
    openmpi) args+=(-DMPI_C_COMPILER=mpicc.openmpi -DMPI_CXX_COMPILER=mpicxx.openmpi
                    "-DMPIEXEC_EXECUTABLE=$(command -v mpirun.openmpi)") ;;
    mpich) args+=(-DMPI_C_COMPILER=mpicc.mpich -DMPI_CXX_COMPILER=mpicxx.mpich
                  "-DMPIEXEC_EXECUTABLE=$(command -v mpiexec.mpich)") ;;
  esac
  if ((host)); then
    args+=(-DVENEER_CUDA=OFF -DVENEER_TESTS=OFF)
  elif ((emulated)); then
    args+=(-DVENEER_CUDA=OFF -DVENEER_EMULATED_GPU_BENCH=ON)
  else
    args+=(-DVENEER_CUDA=ON "-DVENEER_CUDA_ARCHITECTURES=$arch")
  fi
  echo "== configure $dir (${flavour}): ${args[*]}"
  cmake -S "$root" -B "$dir" "${args[@]}" >"$dir.configure.log" 2>&1 || { tail -30 "$dir.configure.log"; return 1; }
  echo "== build $dir"
  local targets=()
  ((host)) && targets=(--target veneer veneer-calibrate veneer-model-check veneer-bench-loop veneer-bench-overhead
                       veneer-halo3d)
  cmake --build "$dir" -j "$(nproc)" "${targets[@]}" >"$dir.build.log" 2>&1 || { tail -40 "$dir.build.log"; return 1; }
}

# --- host collectives on the GPU machine's cores -------------------------------
host_launch() {  # FLAVOUR NP [VAR=VALUE]... -- PROGRAM ARGS
  local flavour=$1 np=$2 pass=()
  shift 2
  while [[ $1 != -- ]]; do
    if [[ $flavour == mpich ]]; then pass+=(-genv "${1%%=*}" "${1#*=}"); else pass+=(-x "$1"); fi
    shift
  done
  shift
  if [[ $flavour == mpich ]]; then
    timeout 300 mpiexec.mpich -np "$np" -bind-to core "${pass[@]}" "$@"
  else
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-0} \
      timeout 300 mpirun -np "$np" --oversubscribe --bind-to "${VENEER_HOST_BIND:-core}" --map-by core "${pass[@]}" "$@"
  fi
}

host_collectives() {  # DIR FLAVOUR
  local dir=$1 flavour=$2 out=$results/host-$2 budget=${VENEER_HOST_BUDGET:-540}
  local veneer=$dir/interposer/libveneer.so profile=$results/host-$2/profile4.json
  mkdir -p "$out"
  time_left() { ((SECONDS < budget)) || { echo "== [$flavour] skipped after ${SECONDS}s: $*"; return 1; }; }
  echo "== [$flavour] $(nproc) cores; $(lscpu 2>/dev/null | grep -m1 'Model name' | sed 's/  */ /g')"
  time_left "calibration" || return
  echo "== [$flavour] calibrate, 4 ranks, ${VENEER_HOST_CALIBRATE:---max 1M}"
  local t0=$SECONDS
  host_launch "$flavour" 4 -- "$dir/bench/veneer-calibrate" ${VENEER_HOST_CALIBRATE:---max 1M} --out "$profile" \
    >"$out/calibrate.log" 2>&1 \
    || { tail -20 "$out/calibrate.log"; fail "calibrate ($flavour)"; return; }
  echo "calibration took $((SECONDS - t0)) s"
  local ranks=(${VENEER_HOST_RANKS:-16 8 4})
  for np in "${ranks[@]}"; do
    time_left "model check at $np ranks" || break
    echo "== [$flavour] model check --apps, $np ranks, the 4-rank profile"
    host_launch "$flavour" "$np" -- "$dir/bench/veneer-model-check" --apps --min 16 --max 1M --no-p2p \
      --profile "$profile" --json "$out/check.np$np.json" >"$out/check.np$np.log" 2>&1 || fail "model check ($np ranks)"
    grep -E "within 1.10x|mean penalty|^model-check:" "$out/check.np$np.log"
  done
  for np in "${ranks[@]:0:2}"; do
    time_left "application loop at $np ranks" || break
    echo "== [$flavour] application loop, $np ranks, the 4-rank profile: library us / Veneer us"
    host_launch "$flavour" "$np" "LD_PRELOAD=$veneer" "VENEER_PROFILE=$profile" -- "$dir/bench/veneer-bench-loop" \
      --bytes 8,4k,128k --compute 100 --iterations 300 --rounds 4 --json "$out/loop.np$np.json" \
      >"$out/loop.np$np.log" 2>&1 || fail "application loop ($np ranks)"
    cat "$out/loop.np$np.log"
  done
  if time_left "OSU's timing loop at ${ranks[0]} ranks"; then
    np=${ranks[0]}
    echo "== [$flavour] OSU's timing loop (veneer-bench-loop --osu), $np ranks, the 4-rank profile"
    host_launch "$flavour" "$np" "LD_PRELOAD=$veneer" "VENEER_PROFILE=$profile" -- "$dir/bench/veneer-bench-loop" \
      --osu --rounds 2 --json "$out/osu.np$np.json" >"$out/osu.np$np.log" 2>&1 || fail "OSU's timing loop ($np ranks)"
    # Per shape in the log; here the geometric means (OSU's average, the slowest rank) and the shapes below 0.95.
    awk '$2 ~ /^[0-9]+$/ && $1 != "loop:" { n++; a += log($5); m += log($7); low += ($5 < 0.95) }
         END { if (n) printf "osu np%d: %d shapes, library/Veneer geometric mean %.3f (slowest rank %.3f), %d below 0.95\n",
                             '"$np"', n, exp(a / n), exp(m / n), low }' "$out/osu.np$np.log"
  fi
  if time_left "pass-through overhead"; then
    echo "== [$flavour] pass-through overhead, 2 ranks, the 4-rank profile"
    host_launch "$flavour" 2 "VENEER_PROFILE=$profile" -- "$dir/bench/veneer-bench-overhead" --repetitions 31 \
      >"$out/overhead.log" 2>&1 || fail "overhead"
    cat "$out/overhead.log"
  fi
  for np in 1 2 4; do
    for with in none profile control; do
      time_left "halo exchange at $np ranks ($with)" || break 2
      local env=()
      case $with in
        none) env=("LD_PRELOAD=$veneer" VENEER_PROFILE=off) ;;
        profile) env=("LD_PRELOAD=$veneer" "VENEER_PROFILE=$profile") ;;
      esac
      host_launch "$flavour" "$np" "${env[@]}" -- "$dir/bench/veneer-halo3d" --q 3 --method isend --paired \
        --iterations 400 >"$out/halo.np$np.$with.log" 2>&1 || fail "halo exchange ($np ranks, $with)"
      echo "halo np$np $with: $(grep -E '^isend ' "$out/halo.np$np.$with.log")"
    done
  done
}

run_suite() {  # DIR LABEL
  local dir=$1 label=$2 out=$results/$2
  mkdir -p "$out"
  local launch=$dir/test/run_mpi.sh veneer=$dir/interposer/libveneer.so
  [[ -x $launch ]] || { fail "$launch missing (a build with VENEER_TESTS=ON is needed)"; return; }
  [[ -f $veneer ]] || { fail "$veneer missing"; return; }
  export VENEER_TEST_TIMEOUT=${VENEER_TEST_TIMEOUT:-280}

  if ((emulated)); then
    echo "== [$label] device transfer pipelines on the emulator (device_transfer_test)"
    "$dir/test/device/device_transfer_test" "--gtest_output=xml:$out/device_transfer_test.xml" >"$out/device_transfer_test.log" 2>&1 \
      && tail -1 "$out/device_transfer_test.log" || { tail -30 "$out/device_transfer_test.log"; fail "device_transfer_test"; }
  else
    for t in kernels_memory_kind_test kernels_emulated_test kernels_device_test kernels_device_runtime_test; do
      # Each binary in a process of its own: the memory-kind test checks that
      # nothing loaded the CUDA driver before it.
      [[ -x $dir/test/kernels/$t ]] || { fail "$t was not built"; continue; }
      echo "== [$label] $t"
      "$dir/test/kernels/$t" "--gtest_output=xml:$out/$t.xml" >"$out/$t.log" 2>&1 && tail -1 "$out/$t.log" \
        || { tail -30 "$out/$t.log"; fail "$t"; }
    done
    if [[ ${VENEER_GPU_SANITIZE:-0} == 1 ]] && command -v compute-sanitizer >/dev/null; then
      echo "== [$label] kernels under compute-sanitizer (memcheck)"
      compute-sanitizer --tool memcheck --error-exitcode 3 "$dir/test/kernels/kernels_device_test" \
        --gtest_filter='DevicePack.Ddtbench*:DevicePack.Benchmark*' >"$out/sanitizer.log" 2>&1 || fail "compute-sanitizer (kernels)"
      compute-sanitizer --tool memcheck --error-exitcode 3 "$dir/test/kernels/kernels_device_runtime_test" \
        --gtest_filter='DeviceTransfer.Ddtbench*:CudaRuntime.*' >>"$out/sanitizer.log" 2>&1 || fail "compute-sanitizer (runtime)"
    fi
  fi

  # Veneer's device paths under MPI (on the emulator, also on a GPU machine:
  # device memory the library cannot read), automatic and staged.
  for mode in auto staged; do
    local env=(VENEER_P2P_MAX_BLOCK=1M VENEER_ALLTOALL_MAX_BLOCK=1M VENEER_P2P_MIN_BYTES=0)
    [[ $mode == staged ]] && env+=(VENEER_DEVICE_METHOD=staged VENEER_DEVICE_CHUNK=4k)
    echo "== [$label] device MPI tests, 2 ranks, $mode"
    env "${env[@]}" "$launch" 2 "$dir/test/device/device_mpi_test" >"$out/device_mpi_test.$mode.log" 2>&1 \
      && grep -m1 "PASSED" "$out/device_mpi_test.$mode.log" || { tail -40 "$out/device_mpi_test.$mode.log"; fail "device_mpi_test ($mode)"; }
  done

  # halo3d on device memory: the library alone (the workaround only, unless it
  # is CUDA-aware), then with Veneer; 1 and 2 ranks.
  local halo=(--memory device --method all)
  if ((emulated)); then halo+=(--nx 10 --ny 8 --nz 6 --r 2 --q 3 --iterations 4 --warmup 1)
  elif ((quick)); then halo+=(--n 16 --r 1 --iterations 5)
  else halo+=(--n 32 --r 2 --iterations 20); fi
  for np in 1 2; do
    for with in library veneer; do
      local pre=()
      [[ $with == veneer ]] && pre=(env "LD_PRELOAD=$veneer")
      echo "== [$label] halo3d ${halo[*]} on $np rank(s), $with"
      "${pre[@]}" "$launch" "$np" "$dir/bench/veneer-halo3d" "${halo[@]}" --json "$out/halo3d.json" \
        >"$out/halo3d.$with.np$np.log" 2>&1
      local rc=$?
      grep -E "^(isend|neighbor|alltoallv|handpacked) |speed-up|verified|not CUDA-aware" "$out/halo3d.$with.np$np.log"
      ((rc == 0)) || { tail -20 "$out/halo3d.$with.np$np.log"; fail "halo3d ($with, $np ranks)"; }
    done
  done

  # The device ping-pong: the library alone, then Veneer each way.
  local pp=()
  ((quick || emulated)) && pp+=(--quick)
  for with in library auto oneshot staged; do
    local pre=()
    case $with in
      auto) pre=(env "LD_PRELOAD=$veneer") ;;
      oneshot) pre=(env "LD_PRELOAD=$veneer" VENEER_DEVICE_METHOD=oneshot) ;;
      staged) pre=(env "LD_PRELOAD=$veneer" VENEER_DEVICE_METHOD=staged) ;;
    esac
    echo "== [$label] device ping-pong, 2 ranks, $with"
    "${pre[@]}" "$launch" 2 "$dir/bench/veneer-bench-pingpong-device" "${pp[@]}" --csv "$out/pingpong.$with.csv" \
      >"$out/pingpong.$with.log" 2>&1 && tail -1 "$out/pingpong.$with.log" \
      || { tail -20 "$out/pingpong.$with.log"; fail "device ping-pong ($with)"; }
  done

  echo "== [$label] ratio table: speed-up over the hand-packed workaround (its time / the method's; >1: faster)"
  echo "halo3d (2 ranks, Veneer preloaded):"
  grep "speed-up" "$out/halo3d.veneer.np2.log" | sed 's/^halo3d: /  /'
  echo "device ping-pong (half round trip of the workaround, and each way of Veneer's against it):"
  if [[ -f $out/pingpong.auto.csv ]]; then
    awk -F, 'FNR == 1 { file++; next }
             { key = $1 "," $2 "," $3; if (!(key in hand)) { order[++n] = key; hand[key] = $6 } s[key, file] = $7 }
             END {
               printf "  %-5s %8s %10s %14s %10s %10s %10s\n", "shape", "block", "bytes", "handpacked us", "auto", "oneshot", "staged"
               for (i = 1; i <= n; i++) {
                 split(order[i], k, ",")
                 printf "  %-5s %8s %10s %14.2f %9.2fx %9.2fx %9.2fx\n", k[1], k[2], k[3], hand[order[i]] * 1e6,
                        s[order[i], 1], s[order[i], 2], s[order[i], 3]
               }
             }' "$out/pingpong.auto.csv" "$out/pingpong.oneshot.csv" "$out/pingpong.staged.csv" | tee "$out/ratio_table.txt"
  fi
  if ((emulated)); then echo "(emulated GPU: the checks count, the times do not)"; fi
}

# --- main ----------------------------------------------------------------------
if ((host)); then
  ls "$carry"/debs/*.deb >/dev/null 2>&1 && { unpack_debs || exit 1; }
  read -r -a found <<<"${VENEER_GPU_MPI:-$(mpis_present)}"
  ((${#found[@]})) || { echo "no MPI found (--prepare elsewhere and carry build-gpu-carry)"; exit 1; }
  for flavour in "${found[@]}"; do
    dir=${VENEER_GPU_BUILD:-$root/build-host}-$flavour
    configure_and_build "$dir" "$flavour" || { fail "build against $flavour"; continue; }
    host_collectives "$dir" "$flavour"
  done
  echo "== results in $results; exit status $status"
  exit $status
fi

if ((!emulated)); then
  echo "== GPU"
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv 2>/dev/null || echo "nvidia-smi failed"
  nvcc --version | tail -2
  arch=${VENEER_CUDA_ARCHITECTURES:-}
  if [[ -z $arch ]]; then
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
    arch=${cc:-90}
  fi
fi

if ((!build_it)); then
  # An existing build (CI: its own build folder), with its own MPI.
  dir=${VENEER_GPU_BUILD:?--no-build needs VENEER_GPU_BUILD}
  run_suite "$dir" "$(basename "$dir")"
else
  ls "$carry"/debs/*.deb >/dev/null 2>&1 && { unpack_debs || exit 1; }
  read -r -a found <<<"${VENEER_GPU_MPI:-$(mpis_present)}"
  if ((${#found[@]} == 0)); then
    ((emulated)) && { echo "no MPI found (install one, or --prepare and carry build-gpu-carry)"; exit 1; }
    echo "== no MPI found: the kernels alone (bench/gpu/standalone; --prepare elsewhere and carry build-gpu-carry for more)"
    build=${VENEER_GPU_BUILD:-$root/build-gpu}
    configure=(-DCMAKE_BUILD_TYPE=Release "-DVENEER_CUDA_ARCHITECTURES=$arch")
    [[ -d $carry/googletest ]] && configure+=("-DVENEER_GTEST_SOURCE=$carry/googletest")
    command -v ninja >/dev/null && configure+=(-G Ninja)
    cmake -S "$root/bench/gpu/standalone" -B "$build" "${configure[@]}" || exit 1
    cmake --build "$build" -j "$(nproc)" || exit 1
    for t in kernels_memory_kind_test kernels_emulated_test kernels_device_test kernels_device_runtime_test; do
      [[ -x $build/test-kernels/$t ]] || { fail "$t was not built"; continue; }
      echo "== $t"
      "$build/test-kernels/$t" "--gtest_output=xml:$results/$t.xml" || fail "$t"
    done
  else
    for flavour in "${found[@]}"; do
      dir=${VENEER_GPU_BUILD:-$root/build-gpu}-$flavour
      configure_and_build "$dir" "$flavour" || { fail "build against $flavour"; continue; }
      run_suite "$dir" "$flavour"
    done
  fi
  if ((!emulated)); then
    build=${VENEER_GPU_BUILD:-$root/build-gpu}
    bench=$(ls "$build"-*/bench/gpu/veneer-bench-gpu-pack "$build/bench-gpu/veneer-bench-gpu-pack" 2>/dev/null | head -1)
    if [[ -n $bench ]]; then
      echo "== GPU pack benchmark"
      quick_args=()
      ((quick)) && quick_args=(--quick)
      "$bench" "${quick_args[@]}" --csv "$results/gpu_pack.csv" --d2h-csv "$results/gpu_pack_d2h.csv" || fail "GPU pack benchmark"
    fi
  fi
fi
echo "== results in $results; exit status $status"
exit $status
