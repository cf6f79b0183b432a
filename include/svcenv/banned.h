/* banned.h — libc calls svcenv code must not use (git's banned.h).
 *
 * The Makefile force-includes this header (-include svcenv/banned.h) into
 * every pkg/ and cmd/ source, so a use of one of these is a compile error:
 * "sorry_strcpy_is_banned" undeclared. It includes the libc headers that
 * declare them first: they are then already parsed when a source includes
 * them again, and the macros below shadow only the source's own calls.
 *
 * Why each, and what to use instead:
 *  - strcpy, strcat: no bound, the classic overflow. Use struct se_strbuf,
 *    or memcpy with lengths already known.
 *  - strncpy: leaves no NUL when the source is too long and zero-fills the
 *    rest; strncat: its bound is the space left, not the buffer's size,
 *    and is easily got wrong. Use snprintf(buf, sizeof(buf), "%s", s) or
 *    struct se_strbuf.
 *  - sprintf, vsprintf: no bound. Use snprintf, se_strbuf_printf or
 *    se_asprintf.
 *  - strtok: hidden state shared by all threads (the daemons are threaded).
 *    Use strtok_r on a copy of the input, or strchr/strcspn. (strtok_r is
 *    allowed, unlike in git: its state is the caller's, and the DNS code
 *    splits its own copies with it.)
 *  - gets: unbounded by design (gone from C11; banned for good measure).
 *  - atoi, atol, atoll: no error report ("80x" is 80, overflow undefined).
 *    Use the parse helpers of <svcenv/parse.h>.
 *  - gmtime, localtime, ctime, asctime: results in one static buffer shared
 *    by all threads. Use gmtime_r, localtime_r and strftime.
 *  - system, popen: run a shell; svcenv never hands a command line to a
 *    shell (iptables and nft are run by argv with pipes).
 *  - mktemp, tmpnam, tempnam: a name another process can take first. Use
 *    mkstemp or mkdtemp. */
#ifndef SVCENV_BANNED_H
#define SVCENV_BANNED_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SE_BANNED(func) sorry_##func##_is_banned

#undef strcpy
#define strcpy(x, y) SE_BANNED(strcpy)
#undef strcat
#define strcat(x, y) SE_BANNED(strcat)
#undef strncpy
#define strncpy(x, y, n) SE_BANNED(strncpy)
#undef strncat
#define strncat(x, y, n) SE_BANNED(strncat)

#undef sprintf
#define sprintf(...) SE_BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) SE_BANNED(vsprintf)

#undef strtok
#define strtok(x, y) SE_BANNED(strtok)

#undef gets
#define gets(x) SE_BANNED(gets)

#undef atoi
#define atoi(x) SE_BANNED(atoi)
#undef atol
#define atol(x) SE_BANNED(atol)
#undef atoll
#define atoll(x) SE_BANNED(atoll)

#undef gmtime
#define gmtime(x) SE_BANNED(gmtime)
#undef localtime
#define localtime(x) SE_BANNED(localtime)
#undef ctime
#define ctime(x) SE_BANNED(ctime)
#undef asctime
#define asctime(x) SE_BANNED(asctime)

#undef system
#define system(x) SE_BANNED(system)
#undef popen
#define popen(x, y) SE_BANNED(popen)

#undef mktemp
#define mktemp(x) SE_BANNED(mktemp)
#undef tmpnam
#define tmpnam(x) SE_BANNED(tmpnam)
#undef tempnam
#define tempnam(x, y) SE_BANNED(tempnam)

#endif
