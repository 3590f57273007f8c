/* Prints the ids a program runs with. The setuid test makes it setuid-root on the host and
   runs it in a sandbox, where it must not gain root (nosuid mounts, no_new_privs, and no
   mapping for uid 0). */
#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>

int main(void) {
    uid_t ruid, euid, suid;
    gid_t rgid, egid, sgid;
    if (getresuid(&ruid, &euid, &suid) != 0 || getresgid(&rgid, &egid, &sgid) != 0) {
        perror("getresuid");
        return 1;
    }
    printf("ruid=%u euid=%u suid=%u rgid=%u egid=%u sgid=%u\n",
           (unsigned)ruid, (unsigned)euid, (unsigned)suid,
           (unsigned)rgid, (unsigned)egid, (unsigned)sgid);
    return 0;
}
