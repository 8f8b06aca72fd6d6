//go:build integration

package etcdversion

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/test/etcdproc"
)

// benign are values for every renamed flag that change nothing a short-lived
// test member would notice.
var benign = map[string]string{
	"bootstrap-defrag-threshold-megabytes": "0",
	"compact-hash-check-time":              "1m0s",
	"compaction-batch-limit":               "1000",
	"compaction-sleep-interval":            "10ms",
	"corrupt-check-time":                   "5m0s",
	"distributed-tracing-address":          "localhost:4317",
	"distributed-tracing-instance-id":      "flags-test",
	"distributed-tracing-sampling-rate":    "0",
	"distributed-tracing-service-name":     "etcd",
	"downgrade-check-time":                 "5s",
	"enable-distributed-tracing":           "false",
	"memory-mlock":                         "false",
	"peer-skip-client-san-verification":    "false",
	"snapshot-catchup-entries":             "5000",
	"warning-apply-duration":               "100ms",
	"watch-progress-notify-interval":       "10m0s",
}

// introducedValues and removedValues are valid values for the flags of the
// introduced and removed tables, so that a release refusing one refuses the
// flag itself, not its value.
var introducedValues = map[string]string{
	"discovery-cacert":                   "",
	"discovery-cert":                     "",
	"discovery-dial-timeout":             "2s",
	"discovery-endpoints":                "",
	"discovery-insecure-skip-tls-verify": "false",
	"discovery-insecure-transport":       "true",
	"discovery-keepalive-time":           "2s",
	"discovery-keepalive-timeout":        "6s",
	"discovery-key":                      "",
	"discovery-password":                 "",
	"discovery-request-timeout":          "5s",
	"discovery-token":                    "",
	"discovery-user":                     "",
	"log-format":                         "json",
	"max-learners":                       "1",
	"warning-unary-request-duration":     "300ms",
}

var removedValues = map[string]string{
	"enable-v2":              "false",
	"proxy":                  "off",
	"proxy-dial-timeout":     "1000",
	"proxy-failure-wait":     "5000",
	"proxy-read-timeout":     "0",
	"proxy-refresh-interval": "30000",
	"proxy-write-timeout":    "5000",
	"discovery":              "",
	"discovery-proxy":        "",
}

// TestFlagsAgainstEtcd checks every entry of the flag tables against the
// real binary of each pinned release: a member given every setting, spelled
// for its release, starts, serves and logs no deprecation; and each spelling
// the tables say a release lacks makes that release refuse to start.
func TestFlagsAgainstEtcd(t *testing.T) {
	g := NewWithT(t)
	g.Expect(slices.Sorted(maps.Keys(benign))).To(Equal(slices.Sorted(maps.Keys(renamedIn36))), "every renamed flag has a value")
	g.Expect(slices.Sorted(maps.Keys(introducedValues))).To(Equal(slices.Sorted(maps.Keys(introduced))))
	g.Expect(slices.Sorted(maps.Keys(removedValues))).To(Equal(slices.Sorted(maps.Keys(removed))))
	for _, s := range etcdproc.Versions(t) {
		t.Run(s, func(t *testing.T) {
			g := NewWithT(t)
			v := MustParse(s)
			bin := etcdproc.Binary(t, s)

			flags, err := Flags(v, everySetting(v))
			g.Expect(err).NotTo(HaveOccurred())
			member := etcdproc.StartCluster(t, bin, etcdproc.Options{Args: flags, Token: "flags-" + s})[0]
			g.Expect(member.Version()).To(Equal(v.String()))
			log, err := os.ReadFile(member.LogFile)
			g.Expect(err).NotTo(HaveOccurred())
			for _, line := range strings.Split(string(log), "\n") {
				g.Expect(strings.ToLower(line)).NotTo(ContainSubstring("deprecated"), "rendered with %v", flags)
			}

			lacking := lackingFlags(v)
			g.Expect(lacking).NotTo(BeEmpty())
			for _, flag := range lacking {
				etcdproc.Refuses(t, bin, flag)
			}
		})
	}
}

// everySetting is every table entry release v has, with a harmless value.
func everySetting(v Version) Settings {
	s := Settings{Flags: map[string]string{}, Features: map[string]bool{}}
	for name, value := range benign {
		s.Flags[name] = value
	}
	for name, since := range introduced {
		// Any discovery flag, even empty, turns discovery on in place of
		// --initial-cluster; those are only checked to be refused where
		// they do not exist.
		if v.Minor >= since && !strings.HasPrefix(name, "discovery") {
			s.Flags[name] = introducedValues[name]
		}
	}
	for name, gone := range removed {
		// Those 3.6 removed are left out: 3.5 already warns that they are
		// deprecated, whatever their values.
		if v.Minor < gone && gone > 6 {
			s.Flags[name] = removedValues[name]
		}
	}
	for name, f := range features {
		if v.Minor >= max(f.since, 6) || (v.Minor < 6 && f.flag35 != "") {
			// Features that change how a member talks to peers or clients
			// stay off; the rest are turned on.
			s.Features[name] = name != "SetMemberLocalAddr" && name != "PriorityRequest"
		}
	}
	return s
}

// lackingFlags are the spellings the tables say release v does not know.
func lackingFlags(v Version) []string {
	var lacking []string
	for name, old := range renamedIn36 {
		switch {
		case v.Minor < 6:
			lacking = append(lacking, "--"+name+"="+benign[name])
		case v.Minor >= 7:
			lacking = append(lacking, "--"+old+"="+benign[name])
		}
	}
	for name, since := range introduced {
		if v.Minor < since {
			lacking = append(lacking, "--"+name+"="+introducedValues[name])
		}
	}
	for name, gone := range removed {
		if v.Minor >= gone {
			lacking = append(lacking, "--"+name+"="+removedValues[name])
		}
	}
	for name, f := range features {
		switch {
		case v.Minor < 6, v.Minor < f.since:
			lacking = append(lacking, "--feature-gates="+name+"=true")
		case v.Minor >= 7 && f.flag35 != "":
			lacking = append(lacking, "--"+f.flag35+"=true")
		}
	}
	return lacking
}
