/*
 * rkubelet test pause program: the first process of every test pod sandbox.
 * It holds the pod's namespaces open by doing nothing, reaps any child that
 * gets re-parented to it, and exits with status 0 on SIGTERM or SIGINT.
 *
 * Build: gcc -static -Os -s -o pause pause.c
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	sigset_t wanted;
	int sig;

	if (argc == 2 && strcmp(argv[1], "-v") == 0) {
		puts("rkubelet-test-pause 3.10");
		return 0;
	}

	/* Handle the signals synchronously: block them and collect them with sigwait. */
	sigemptyset(&wanted);
	sigaddset(&wanted, SIGTERM);
	sigaddset(&wanted, SIGINT);
	sigaddset(&wanted, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, &wanted, NULL) != 0) {
		perror("sigprocmask");
		return 1;
	}

	for (;;) {
		if (sigwait(&wanted, &sig) != 0)
			continue;
		if (sig == SIGTERM || sig == SIGINT)
			return 0;
		/* SIGCHLD: collect every exited child, do not block. */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
}
