/*
 * The sandbox ("pause") process of the node suite's pods: it holds the pod's namespaces, reaps the
 * children a shared process namespace hands it, and exits 0 on SIGTERM or SIGINT, as the kubelet stops a pod.
 * Built static by testkit/node_images.py and run as the only file of an image FROM scratch.
 */
#include <signal.h>
#include <sys/wait.h>

int main(void)
{
    sigset_t wanted;
    int received = 0;

    sigemptyset(&wanted);
    sigaddset(&wanted, SIGTERM);
    sigaddset(&wanted, SIGINT);
    sigaddset(&wanted, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &wanted, 0) != 0)
        return 1;
    for (;;) {
        if (sigwait(&wanted, &received) != 0)
            return 1;
        if (received == SIGCHLD) {
            while (waitpid(-1, 0, WNOHANG) > 0)
                ;
            continue;
        }
        return 0;
    }
}
