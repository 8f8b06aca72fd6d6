package etcdversion_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/internal/etcdversion"
)

// operatorFlags are the flags internal/component/pod renders today.
var operatorFlags = map[string]string{
	"name":                        "demo-x7k2p",
	"data-dir":                    "/var/lib/etcd/data",
	"listen-client-urls":          "http://0.0.0.0:2379",
	"advertise-client-urls":       "http://demo-x7k2p.demo.prod.svc.cluster.local:2379",
	"listen-peer-urls":            "http://0.0.0.0:2380",
	"initial-advertise-peer-urls": "http://demo-x7k2p.demo.prod.svc.cluster.local:2380",
	"listen-metrics-urls":         "http://0.0.0.0:2381",
	"initial-cluster-token":       "etcd-3f1c",
	"quota-backend-bytes":         "715827882",
	"auto-compaction-mode":        "periodic",
	"auto-compaction-retention":   "1h",
	"snapshot-count":              "10000",
}

func TestFlags(t *testing.T) {
	t.Parallel()
	type want struct {
		flags []string
		err   string
	}
	cases := []struct {
		name     string
		settings etcdversion.Settings
		// by minor line: 3.5, 3.6, 3.7
		v35, v36, v37 want
	}{
		{
			name:     "nothing",
			settings: etcdversion.Settings{},
			v35:      want{flags: []string{}}, v36: want{flags: []string{}}, v37: want{flags: []string{}},
		},
		{
			name:     "a renamed flag",
			settings: etcdversion.Settings{Flags: map[string]string{"corrupt-check-time": "5m0s"}},
			v35:      want{flags: []string{"--experimental-corrupt-check-time=5m0s"}},
			v36:      want{flags: []string{"--corrupt-check-time=5m0s"}},
			v37:      want{flags: []string{"--corrupt-check-time=5m0s"}},
		},
		{
			name: "features",
			settings: etcdversion.Settings{Features: map[string]bool{
				"InitialCorruptCheck": true, "CompactHashCheck": true, "TxnModeWriteWithSharedBuffer": false,
			}},
			v35: want{flags: []string{
				"--experimental-compact-hash-check-enabled=true",
				"--experimental-initial-corrupt-check=true",
				"--experimental-txn-mode-write-with-shared-buffer=false",
			}},
			v36: want{flags: []string{"--feature-gates=CompactHashCheck=true,InitialCorruptCheck=true,TxnModeWriteWithSharedBuffer=false"}},
			v37: want{flags: []string{"--feature-gates=CompactHashCheck=true,InitialCorruptCheck=true,TxnModeWriteWithSharedBuffer=false"}},
		},
		{
			name: "renamed flags beside plain ones and features, sorted",
			settings: etcdversion.Settings{
				Flags:    map[string]string{"watch-progress-notify-interval": "10m0s", "snapshot-count": "5000"},
				Features: map[string]bool{"StopGRPCServiceOnDefrag": true},
			},
			v35: want{flags: []string{
				"--experimental-stop-grpc-service-on-defrag=true",
				"--experimental-watch-progress-notify-interval=10m0s",
				"--snapshot-count=5000",
			}},
			v36: want{flags: []string{"--feature-gates=StopGRPCServiceOnDefrag=true", "--snapshot-count=5000", "--watch-progress-notify-interval=10m0s"}},
			v37: want{flags: []string{"--feature-gates=StopGRPCServiceOnDefrag=true", "--snapshot-count=5000", "--watch-progress-notify-interval=10m0s"}},
		},
		{
			name:     "a flag 3.6 introduced",
			settings: etcdversion.Settings{Flags: map[string]string{"max-learners": "2"}},
			v35:      want{err: "etcd 3.5.35 has no --max-learners flag; it came with 3.6"},
			v36:      want{flags: []string{"--max-learners=2"}},
			v37:      want{flags: []string{"--max-learners=2"}},
		},
		{
			name:     "a flag 3.6 removed",
			settings: etcdversion.Settings{Flags: map[string]string{"enable-v2": "false"}},
			v35:      want{flags: []string{"--enable-v2=false"}},
			v36:      want{err: "etcd 3.6.16 has no --enable-v2 flag; it was removed in 3.6"},
			v37:      want{err: "etcd 3.7.3 has no --enable-v2 flag; it was removed in 3.6"},
		},
		{
			name:     "a flag 3.7 removed",
			settings: etcdversion.Settings{Flags: map[string]string{"discovery": ""}},
			v35:      want{flags: []string{"--discovery="}},
			v36:      want{flags: []string{"--discovery="}},
			v37:      want{err: "etcd 3.7.3 has no --discovery flag; it was removed in 3.7"},
		},
		{
			name:     "a feature 3.5 has no flag for",
			settings: etcdversion.Settings{Features: map[string]bool{"SetMemberLocalAddr": true}},
			v35:      want{err: "etcd 3.5.35 has no feature SetMemberLocalAddr; it came with 3.6"},
			v36:      want{flags: []string{"--feature-gates=SetMemberLocalAddr=true"}},
			v37:      want{flags: []string{"--feature-gates=SetMemberLocalAddr=true"}},
		},
		{
			name:     "a feature of 3.7",
			settings: etcdversion.Settings{Features: map[string]bool{"FastLeaseKeepAlive": false}},
			v35:      want{err: "etcd 3.5.35 has no feature FastLeaseKeepAlive; it came with 3.7"},
			v36:      want{err: "etcd 3.6.16 has no feature FastLeaseKeepAlive; it came with 3.7"},
			v37:      want{flags: []string{"--feature-gates=FastLeaseKeepAlive=false"}},
		},
		{
			name:     "an unknown feature",
			settings: etcdversion.Settings{Features: map[string]bool{"TimeTravel": true}},
			v35:      want{err: `etcd has no feature "TimeTravel"`},
			v36:      want{err: `etcd has no feature "TimeTravel"`},
			v37:      want{err: `etcd has no feature "TimeTravel"`},
		},
		{
			name:     "an experimental spelling",
			settings: etcdversion.Settings{Flags: map[string]string{"experimental-corrupt-check-time": "5m"}},
			v35:      want{err: "must be named as etcd 3.6 names it"},
			v36:      want{err: "must be named as etcd 3.6 names it"},
			v37:      want{err: "must be named as etcd 3.6 names it"},
		},
		{
			name:     "feature gates as a flag",
			settings: etcdversion.Settings{Flags: map[string]string{"feature-gates": "CompactHashCheck=true"}},
			v35:      want{err: "Settings.Features"},
			v36:      want{err: "Settings.Features"},
			v37:      want{err: "Settings.Features"},
		},
		{
			name:     "a name with its dashes",
			settings: etcdversion.Settings{Flags: map[string]string{"--name": "x"}},
			v35:      want{err: "without its dashes"},
			v36:      want{err: "without its dashes"},
			v37:      want{err: "without its dashes"},
		},
	}
	for _, tc := range cases {
		for version, w := range map[string]want{"3.5.35": tc.v35, "3.6.16": tc.v36, "3.7.3": tc.v37} {
			t.Run(tc.name+"/"+version, func(t *testing.T) {
				t.Parallel()
				g := NewWithT(t)
				flags, err := etcdversion.Flags(etcdversion.MustParse(version), tc.settings)
				if w.err != "" {
					g.Expect(err).To(MatchError(ContainSubstring(w.err)))
					return
				}
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(flags).To(Equal(w.flags))
			})
		}
	}
}

// TestOperatorFlagsAreTheSameInEveryVersion records what was found in etcd's
// sources: none of the flags the operator renders today is spelled
// differently by any supported release.
func TestOperatorFlagsAreTheSameInEveryVersion(t *testing.T) {
	t.Parallel()
	var want []string
	for _, name := range []string{
		"advertise-client-urls", "auto-compaction-mode", "auto-compaction-retention", "data-dir",
		"initial-advertise-peer-urls", "initial-cluster-token", "listen-client-urls", "listen-metrics-urls",
		"listen-peer-urls", "name", "quota-backend-bytes", "snapshot-count",
	} {
		want = append(want, "--"+name+"="+operatorFlags[name])
	}
	for _, version := range []string{"3.5.35", "3.6.16", "3.7.3"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			flags, err := etcdversion.Flags(etcdversion.MustParse(version), etcdversion.Settings{Flags: operatorFlags})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(flags).To(Equal(want))
		})
	}
}

func TestFlagsRefuseUnsupportedVersions(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"3.4.33", "3.8.0", "4.0.0"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			_, err := etcdversion.Flags(etcdversion.MustParse(version), etcdversion.Settings{})
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring("etcd " + version + " is not supported")))
		})
	}
}
