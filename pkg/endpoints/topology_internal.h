/* The topology hint allocation (upstream topologycache AddHints and
 * RemoveHintsFromSlices) on one address type's slices, for slices.c and the
 * unit tests. */
#ifndef SVCENV_TOPOLOGY_INTERNAL_H
#define SVCENV_TOPOLOGY_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <svcenv/endpoints.h>
#include <svcenv/macro.h>
#include <svcenv/topology.h>

#define TOPO_NO_ZONE_SPECIFIED  "One or more endpoints do not have a zone specified"
#define TOPO_NO_ALLOCATED_HINTS "No hints allocated for zones"
#define TOPO_HINTS_ENABLED      "Topology Aware Hints has been enabled"
#define TOPO_HINTS_DISABLED     "Topology Aware Hints has been disabled"
#define TOPO_INSUFFICIENT_NODE_INFO \
 "Insufficient Node information: allocatable CPU or zone not specified on one or more nodes"
#define TOPO_ONE_ZONE_ONLY          "Nodes only ready in one zone"
#define TOPO_INSUFFICIENT_ENDPOINTS "Insufficient number of endpoints"
#define TOPO_MIN_EXCEEDS_THRESHOLD \
 "Unable to allocate minimum required endpoints to each zone without exceeding overload threshold"
#define TOPO_REASON_ENABLED  "TopologyAwareHintsEnabled"
#define TOPO_REASON_DISABLED "TopologyAwareHintsDisabled"

/* upstream SliceInfo: the slices of one Service and address type that the
 * sync writes (create, update: owned by the caller, writable) or leaves
 * (unchanged: borrowed). The hint code may move an unchanged slice to
 * update through copy (a writable copy that keeps its endpoints and hints),
 * so update must be a malloc'd array it can grow. */
struct topo_slices {
        const char *key; /* "ns/name" */
        const char *type; /* "IPv4" / "IPv6" */
        struct se_endpoint_slice **create;
        uint32_t n_create;
        struct se_endpoint_slice **update;
        uint32_t n_update;
        const struct se_endpoint_slice **unchanged;
        uint32_t n_unchanged;
        int (*copy)(void *data, const struct se_endpoint_slice *src,
                    struct se_endpoint_slice **ret);
        void *copy_data;
        /* events are appended here */
        struct se_slices_event **events;
        uint32_t *n_events;
};

/* One zone's row: the union of upstream's maps keyed by zone; has_* says
 * whether the zone is a key of that map. */
struct zrow {
        const char *zone;
        bool alloc; /* allocations */
        long minimum, maximum;
        double desired;
        bool has_hints; /* allocatedHintsByZone */
        long hints;
        bool has_gd, has_rd; /* givingZonesDesired, receivingZonesDesired */
        double gd, rd;
        long give, recv; /* givingZones, receivingZones (a key while > 0) */
        bool has_redist;
        long redist;
        long scratch; /* one slice's hintsByZone */
};

struct ztab {
        struct zrow *v;
        size_t n, cap;
};

/* The row of zone (borrowed string), added when missing (rows stay sorted,
 * so earlier row pointers move); NULL on -ENOMEM. */
struct zrow *endpoints_topo_zone_get(struct ztab *t, const char *zone);
/* upstream getHintsByZone: false when the slice's hints no longer fit (a
 * ready endpoint without zone hints, a hint for a zone without allocation,
 * or more than a zone's maximum); else each row's scratch holds the
 * slice's count. */
bool endpoints_topo_hints_fit(const struct se_endpoint_slice *s, struct ztab *zt);
/* upstream getGivingAndReceivingZones: from alloc/desired and hints, sets
 * give and recv. */
void endpoints_topo_giving_receiving(struct ztab *zt);
/* upstream redistributeHints over si's create then update slices: moves
 * hints from giving to receiving zones (rows' give/recv/redist). 0 or
 * -ENOMEM. */
int endpoints_topo_redistribute(struct topo_slices *si, struct ztab *zt);

/* upstream AddHints: CPU-proportional zone hints on create and update (and
 * on unchanged slices whose hints no longer fit, moved to update), or all
 * hints removed with a Warning event; records the result in t. 0 or
 * -ENOMEM. */
int endpoints_topo_add_hints(struct se_topology_cache *t, struct topo_slices *si);
/* Appends an event (message formatted). 0 or -ENOMEM. */
int endpoints_topo_event(struct se_slices_event **v, uint32_t *n, bool warning, const char *reason,
                         const char *fmt, ...) SE_PRINTF(5, 6);
/* For tests: sets the zone shares directly (n == 0: none, as after
 * insufficient node information). 0 or -ENOMEM. */
int endpoints_topo_set_ratios(struct se_topology_cache *t, const char *const *zones,
                              const double *ratios, size_t n);
/* For tests: the hints recorded for key and type as zone=count pairs
 * "a=1,b=2" (sorted) into buf; false when none are recorded. */
bool endpoints_topo_recorded(struct se_topology_cache *t, const char *key, const char *type,
                             char *buf, size_t size);

#endif
