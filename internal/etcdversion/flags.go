package etcdversion

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The tables below were read from etcd's flag registrations (etcdmain and
// embed config.go, features/etcd_features.go) at v3.5.35, v3.6.16 and v3.7.3.
//
// None of the flags the operator renders today (--name, --data-dir, the
// URLs, --initial-cluster*, --quota-backend-bytes, --auto-compaction-*,
// --snapshot-count) differs between those releases; they pass through
// unchanged. What differs is the tuning etcd 3.5 marks experimental: 3.6
// renames it (keeping the old names, deprecated) and 3.7 drops every
// --experimental-* flag.
//
// Defaults that changed are not pinned here: --snapshot-count went from
// 100000 to 10000 in 3.6 (the operator renders it only when the user sets
// it, and either value is safe), --v2-deprecation from not-yet to write-only
// (3.6 enforces it whatever the flag says, and the operator never enables the
// v2 API), and --discovery-fallback from proxy to exit (the operator uses no
// discovery).

// renamedIn36 maps a flag's name from 3.6 on to its 3.5 name.
var renamedIn36 = map[string]string{
	"bootstrap-defrag-threshold-megabytes": "experimental-bootstrap-defrag-threshold-megabytes",
	"compact-hash-check-time":              "experimental-compact-hash-check-time",
	"compaction-batch-limit":               "experimental-compaction-batch-limit",
	"compaction-sleep-interval":            "experimental-compaction-sleep-interval",
	"corrupt-check-time":                   "experimental-corrupt-check-time",
	"distributed-tracing-address":          "experimental-distributed-tracing-address",
	"distributed-tracing-instance-id":      "experimental-distributed-tracing-instance-id",
	"distributed-tracing-sampling-rate":    "experimental-distributed-tracing-sampling-rate",
	"distributed-tracing-service-name":     "experimental-distributed-tracing-service-name",
	"downgrade-check-time":                 "experimental-downgrade-check-time",
	"enable-distributed-tracing":           "experimental-enable-distributed-tracing",
	"memory-mlock":                         "experimental-memory-mlock",
	"peer-skip-client-san-verification":    "experimental-peer-skip-client-san-verification",
	"snapshot-catchup-entries":             "experimental-snapshot-catchup-entries",
	"warning-apply-duration":               "experimental-warning-apply-duration",
	"watch-progress-notify-interval":       "experimental-watch-progress-notify-interval",
}

// introduced names flags with no spelling at all before a minor.
var introduced = map[string]int{
	"discovery-cacert":                   6,
	"discovery-cert":                     6,
	"discovery-dial-timeout":             6,
	"discovery-endpoints":                6,
	"discovery-insecure-skip-tls-verify": 6,
	"discovery-insecure-transport":       6,
	"discovery-keepalive-time":           6,
	"discovery-keepalive-timeout":        6,
	"discovery-key":                      6,
	"discovery-password":                 6,
	"discovery-request-timeout":          6,
	"discovery-token":                    6,
	"discovery-user":                     6,
	"log-format":                         6,
	"max-learners":                       6,
	"warning-unary-request-duration":     6,
}

// removed names flags a minor no longer accepts.
var removed = map[string]int{
	"enable-v2":              6,
	"proxy":                  6,
	"proxy-dial-timeout":     6,
	"proxy-failure-wait":     6,
	"proxy-read-timeout":     6,
	"proxy-refresh-interval": 6,
	"proxy-write-timeout":    6,
	"discovery":              7,
	"discovery-proxy":        7,
}

// feature is a server feature gate of etcd 3.6 and later. flag35 is the
// boolean flag etcd 3.5 has for it, if any; since is the minor that brought
// it, for gates that came later.
type feature struct {
	flag35 string
	since  int
}

var features = map[string]feature{
	"CompactHashCheck":             {flag35: "experimental-compact-hash-check-enabled"},
	"InitialCorruptCheck":          {flag35: "experimental-initial-corrupt-check"},
	"LeaseCheckpoint":              {flag35: "experimental-enable-lease-checkpoint"},
	"LeaseCheckpointPersist":       {flag35: "experimental-enable-lease-checkpoint-persist"},
	"StopGRPCServiceOnDefrag":      {flag35: "experimental-stop-grpc-service-on-defrag"},
	"TxnModeWriteWithSharedBuffer": {flag35: "experimental-txn-mode-write-with-shared-buffer"},
	"SetMemberLocalAddr":           {since: 6},
	"FastLeaseKeepAlive":           {since: 7},
	"PriorityRequest":              {since: 7},
}

// Settings are etcd flags named independently of the release.
type Settings struct {
	// Flags are values by flag name as etcd 3.6 and later spell it, without
	// the dashes: "corrupt-check-time" rather than
	// "experimental-corrupt-check-time".
	Flags map[string]string
	// Features are server features by their 3.6 feature-gate name, such as
	// "InitialCorruptCheck".
	Features map[string]bool
}

// Flags renders settings as the command-line flags of etcd release v, sorted.
// It refuses a setting that release has no flag for, rather than let the
// member fail to start on an unknown flag.
func Flags(v Version, s Settings) ([]string, error) {
	if err := supported(v); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(s.Flags)+len(s.Features))
	for _, name := range slices.Sorted(maps.Keys(s.Flags)) {
		flag, err := flagName(v, name)
		if err != nil {
			return nil, err
		}
		out = append(out, "--"+flag+"="+s.Flags[name])
	}
	var gates []string
	for _, name := range slices.Sorted(maps.Keys(s.Features)) {
		f, ok := features[name]
		if !ok {
			return nil, fmt.Errorf("etcd has no feature %q; known features are %s", name, strings.Join(slices.Sorted(maps.Keys(features)), ", "))
		}
		value := strconv.FormatBool(s.Features[name])
		switch {
		case f.since > v.Minor || (v.Minor < 6 && f.flag35 == ""):
			return nil, fmt.Errorf("etcd %s has no feature %s; it came with %d.%d", v, name, supportedMajor, max(f.since, 6))
		case v.Minor < 6:
			out = append(out, "--"+f.flag35+"="+value)
		default:
			gates = append(gates, name+"="+value)
		}
	}
	if len(gates) > 0 {
		out = append(out, "--feature-gates="+strings.Join(gates, ","))
	}
	slices.Sort(out)
	return out, nil
}

func flagName(v Version, name string) (string, error) {
	switch {
	case strings.HasPrefix(name, "--"):
		return "", fmt.Errorf("etcd flag %q must be named without its dashes", name)
	case strings.HasPrefix(name, "experimental-"):
		return "", fmt.Errorf("etcd flag --%s must be named as etcd 3.6 names it, without experimental-; the spelling for each release is chosen here", name)
	case name == "feature-gates":
		return "", fmt.Errorf("etcd's --feature-gates are set through Settings.Features, which etcd 3.5 spells as separate flags")
	}
	if since, ok := introduced[name]; ok && v.Minor < since {
		return "", fmt.Errorf("etcd %s has no --%s flag; it came with %d.%d", v, name, supportedMajor, since)
	}
	if gone, ok := removed[name]; ok && v.Minor >= gone {
		return "", fmt.Errorf("etcd %s has no --%s flag; it was removed in %d.%d", v, name, supportedMajor, gone)
	}
	if old, ok := renamedIn36[name]; ok && v.Minor < 6 {
		return old, nil
	}
	return name, nil
}
