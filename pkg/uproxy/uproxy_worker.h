/* uproxy_worker.h — one epoll loop (thread) of the proxy and what it
 * shares with the TCP (uproxy_tcp.c) and UDP (uproxy_udp.c) halves. */
#ifndef SVCENV_UPROXY_WORKER_H
#define SVCENV_UPROXY_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <svcenv/hashmap.h>
#include <svcenv/uproxy.h>

#include "uproxy_internal.h"

#define UPROXY_UDP_BATCH 16 /* datagrams per recvmmsg/sendmmsg */
#define UPROXY_PIPE_POOL 256 /* empty pipes kept per worker for the next connections */
#define UPROXY_UDP_MAX   65536 /* bytes of one datagram */

enum uproxy_htype {
        UH_WAKE,
        UH_TCP_LISTEN,
        UH_UDP_LISTEN,
        UH_TCP_CLIENT,
        UH_TCP_BACKEND,
        UH_UDP_CLIENT,
        UH_UDP_BACKEND,
};

/* What an epoll event points at. */
struct uproxy_handle {
        enum uproxy_htype type;
        int fd;
        uint32_t events; /* as registered */
        void *owner;
};

/* A published snapshot with the balancing state of each of its services. */
struct uproxy_lookup {
        struct se_uproxy_snapshot *snap;
        struct uproxy_svc **svcs; /* parallel to snap->svcs, one reference each */
};

struct uproxy_conn;
struct uproxy_usess;

struct uproxy_worker {
        struct se_uproxy *up;
        pthread_t tid;
        bool started;
        int epfd;
        struct uproxy_handle wake, tcp[2], udp[2]; /* [0] IPv4, [1] IPv6 */
        atomic_uint_fast64_t seen; /* the epoch this worker runs on */
        uint64_t epoch; /* its last one, to notice a change */
        struct uproxy_lookup *lk; /* for the current iteration */
        int64_t now_ns;
        int64_t accept_paused_until; /* after EMFILE: 0 when accepting */
        struct uproxy_conn *connecting; /* connects under way (timeouts) */
        struct uproxy_conn *conns; /* every open TCP connection */
        struct uproxy_conn *dead; /* closed in this batch, freed after it */
        struct uproxy_conn *busy; /* stopped at their round limit: run again */
        unsigned n_conns;
        int pipes[UPROXY_PIPE_POOL][2]; /* empty pipes, reused: a pipe2 and two closes saved */
        unsigned n_pipes;
        struct se_hashmap udp_sessions; /* "client|vip" -> session */
        struct uproxy_usess *lru_head, *lru_tail; /* least recently active first */
        struct uproxy_usess *udp_dead;
        unsigned char *udp_buf; /* UPROXY_UDP_BATCH * UPROXY_UDP_MAX */
};

struct se_uproxy {
        struct se_uproxy_config cfg;
        _Atomic(struct uproxy_lookup *) cur;
        atomic_uint_fast64_t epoch;
        atomic_bool stop;
        struct uproxy_worker *workers;
        unsigned n_workers;
        pthread_mutex_t mu; /* guards svcs (update vs metrics) */
        struct se_hashmap svcs; /* key -> struct uproxy_svc */
        uint64_t gen;
        uint64_t fd_limit;
        atomic_ulong accept_emfile;
};

/* Registers h (fd, type set) for events, or changes its events. */
int uproxy_watch(struct uproxy_worker *w, struct uproxy_handle *h, uint32_t events);
/* The service of a destination in the worker's current lookup; NULL if none. */
struct uproxy_svc *uproxy_find(struct uproxy_worker *w, const struct sockaddr *dst, int proto);

/* TCP (uproxy_tcp.c). */
void uproxy_tcp_accept(struct uproxy_worker *w, struct uproxy_handle *h);
void uproxy_tcp_event(struct uproxy_worker *w, struct uproxy_handle *h, uint32_t ev);
/* Runs the connections on the busy list (before the reap: some may be
 * closed); the loop polls without waiting while the list is not empty. */
void uproxy_tcp_more(struct uproxy_worker *w);
/* Connect timeouts due; returns the ms until the next one (-1 none). */
int uproxy_tcp_timers(struct uproxy_worker *w);
void uproxy_tcp_reap(struct uproxy_worker *w);
void uproxy_tcp_close_all(struct uproxy_worker *w);

/* UDP (uproxy_udp.c). */
void uproxy_udp_listen(struct uproxy_worker *w, struct uproxy_handle *h);
void uproxy_udp_event(struct uproxy_worker *w, struct uproxy_handle *h, uint32_t ev);
/* Idle sessions ended; returns the ms until the next may end (-1 none). */
int uproxy_udp_timers(struct uproxy_worker *w);
/* Ends the sessions of endpoints gone from their service. */
void uproxy_udp_sweep_removed(struct uproxy_worker *w);
void uproxy_udp_reap(struct uproxy_worker *w);
void uproxy_udp_close_all(struct uproxy_worker *w);

#endif
