# Shared by the benchmark scripts: MPI as root, and the mean ms/iteration after the first.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mean_ms() {
  /usr/bin/python3 -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; \
r=[x['ms_per_iter'] for x in r if 'ms_per_iter' in x][1:]; print(sum(r)/len(r))" "$1"
}
