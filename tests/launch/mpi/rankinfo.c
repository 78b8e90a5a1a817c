/* One line per MPI rank: "rank R of N node NODE cpus LIST", then a barrier.
 *
 * NODE is the SLURM node the rank runs on. Every pretend node of the test cluster has the same
 * host name, so it is read from SLURMD_NODENAME, as slurmstepd set it for the process it
 * started on that node: the rank itself under srun, Hydra's proxy under mpiexec (which hands
 * its ranks the environment of mpiexec, batch node's SLURMD_NODENAME included). LIST is the
 * CPUs the rank may run on. With an argument R, rank R exits with code 3 after the line,
 * without MPI_Finalize, while the others wait for it in a barrier. */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int read_file(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = 0;
    return (int)n;
}

static int parent_of(int pid) {
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (read_file(path, buf, sizeof buf) < 0) return 0;
    char *end = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
    int ppid = 0;
    if (end) sscanf(end + 2, "%*c %d", &ppid);
    return ppid;
}

/* SLURMD_NODENAME of the nearest ancestor (or self) that slurmstepd started. */
static void node_name(char *out, size_t size) {
    snprintf(out, size, "?");
    for (int pid = getpid(); pid > 1;) {
        int ppid = parent_of(pid);
        char path[64], comm[256];
        snprintf(path, sizeof path, "/proc/%d/comm", ppid);
        if (ppid <= 1 || read_file(path, comm, sizeof comm) < 0) return;
        if (strncmp(comm, "slurmstepd", 10) == 0) {
            static char env[1 << 20];
            snprintf(path, sizeof path, "/proc/%d/environ", pid);
            int n = read_file(path, env, sizeof env);
            for (int i = 0; i < n; i += (int)strlen(env + i) + 1)
                if (strncmp(env + i, "SLURMD_NODENAME=", 16) == 0) {
                    snprintf(out, size, "%s", env + i + 16);
                    return;
                }
            return;
        }
        pid = ppid;
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    char cpus[1024] = "", node[256];
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) n += snprintf(cpus + n, sizeof cpus - n, "%s%d", n ? "," : "", c);
    node_name(node, sizeof node);
    MPI_Barrier(MPI_COMM_WORLD);
    printf("rank %d of %d node %s cpus %s\n", rank, size, node, cpus);
    fflush(stdout);
    if (argc > 1 && rank == atoi(argv[1])) exit(3);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
