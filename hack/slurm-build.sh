#!/usr/bin/env bash
# Build one Slurm release's slurmctld, scontrol, sbatch, sinfo and plugins for
# tests/webhook/export/test_slurmctld.py (which skips without a build).
#
#   bash hack/slurm-build.sh [X.Y [DIR]]     e.g. bash hack/slurm-build.sh 25.05
#
# Installs into DIR/X.Y (default DIR: ../slurm-build beside the clone, or $GPUFABRIC_SLURM_BUILD).
# Source: the newest slurm-X-Y-*-1 tag of $SLURM_GIT (a SchedMD/slurm clone or bare git dir), else
# a shallow clone of https://github.com/SchedMD/slurm. Needs gcc, make, python3 and perl; no munge,
# no libjwt (the tests run auth/none and cred/none on this host only). -O0 and one job at a time:
# about 10 minutes of one core; set JOBS=N to use more.
set -euo pipefail
release=${1:-25.05}
if [[ $release == -h || $release == --help ]]; then
	sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
fi
[[ $release =~ ^[0-9][0-9]\.[0-9][0-9]$ ]] || { echo "slurm-build: release X.Y, not '$release'" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${2:-${GPUFABRIC_SLURM_BUILD:-$root/../slurm-build}}
prefix=$dir/$release
src=$dir/src-$release
jobs=${JOBS:-1}
series=slurm-${release/./-}-
mkdir -p "$dir"
if [[ ! -x $src/configure ]]; then
	if [[ -n ${SLURM_GIT:-} ]]; then
		tag=$(git --git-dir="$SLURM_GIT" tag -l "${series}*-1" --sort=-v:refname | head -1)
		[[ -n $tag ]] || { echo "no ${series}*-1 tag in $SLURM_GIT" >&2; exit 2; }
		mkdir -p "$src"
		git --git-dir="$SLURM_GIT" archive "$tag" | tar -x -C "$src"
	else
		tag=$(git ls-remote --tags --refs https://github.com/SchedMD/slurm "${series}*-1" |
			sed 's,.*refs/tags/,,' | sort -V | tail -1)
		[[ -n $tag ]] || { echo "no ${series}*-1 tag at SchedMD/slurm" >&2; exit 2; }
		git clone --quiet --depth 1 --branch "$tag" https://github.com/SchedMD/slurm "$src"
	fi
	echo "slurm-build: $tag in $src"
fi
cd "$src"
if [[ ! -f config.status ]]; then
	nice -n 19 ./configure --prefix="$prefix" --sysconfdir="$prefix/etc" \
		--disable-optimizations --disable-debug --disable-slurmrestd --disable-x11 \
		--disable-sview --disable-partial-attach --without-readline --without-munge \
		--without-hwloc --without-pmix --without-ucx --without-nvml --without-rsmi \
		--without-hdf5 --without-lua --without-mysql_config >configure.out
fi
# slurmctld's Makefile builds libslurmfull and the libraries it links on its own.
for part in src/slurmctld src/plugins src/scontrol src/sbatch src/sinfo; do
	nice -n 19 make -j"$jobs" -C "$part" >/dev/null
done
for part in src/api src/plugins src/slurmctld src/scontrol src/sbatch src/sinfo; do
	nice -n 19 make -C "$part" install >/dev/null
done
"$prefix/sbin/slurmctld" -V
