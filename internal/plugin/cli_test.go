package plugin

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

func TestParse(t *testing.T) {
	cases := []struct {
		args       []string
		command    string
		positional []string
		check      func(g Gomega, o *options)
	}{
		{
			args: []string{"status"}, command: "status",
			check: func(g Gomega, o *options) { g.Expect(o.output).To(Equal(OutputTable)) },
		},
		{
			args: []string{"status", "-n", "prod", "demo", "-o", "json"}, command: "status", positional: []string{"demo"},
			check: func(g Gomega, o *options) {
				g.Expect(o.kube).To(Equal(KubeFlags{Namespace: "prod"}))
				g.Expect(o.output).To(Equal(OutputJSON))
			},
		},
		{
			args:    []string{"--kubeconfig", "/k", "--context=c", "--namespace=prod", "alarms", "list", "demo", "--output", "yaml"},
			command: "alarms list", positional: []string{"demo"},
			check: func(g Gomega, o *options) {
				g.Expect(o.kube).To(Equal(KubeFlags{Kubeconfig: "/k", Context: "c", Namespace: "prod"}))
				g.Expect(o.output).To(Equal(OutputYAML))
			},
		},
		{
			// A flag value that looks like a command word stays a value.
			args: []string{"move-leader", "--to", "status", "demo"}, command: "move-leader", positional: []string{"demo"},
			check: func(g Gomega, o *options) { g.Expect(o.to).To(Equal("status")) },
		},
		{
			args: []string{"compact", "demo", "--revision", "42"}, command: "compact", positional: []string{"demo"},
			check: func(g Gomega, o *options) { g.Expect(o.revision).To(BeEquivalentTo(42)) },
		},
		{
			args: []string{"defrag", "--", "-odd-name"}, command: "defrag", positional: []string{"-odd-name"},
			check: func(g Gomega, o *options) { g.Expect(o.timeout).To(Equal(DefaultDefragTimeout)) },
		},
	}
	for _, tc := range cases {
		g := NewWithT(t)
		cmd, o, positional, err := parse(tc.args)
		g.Expect(err).NotTo(HaveOccurred(), "%v", tc.args)
		g.Expect(cmd.name).To(Equal(tc.command), "%v", tc.args)
		g.Expect(positional).To(HaveExactElements(tc.positional), "%v", tc.args)
		tc.check(g, o)
	}
}

func TestUsageErrors(t *testing.T) {
	cases := map[string][]string{
		"flag provided but not defined: -bogus":                     {"status", "--bogus"},
		"status: flag provided but not defined: -to":                {"status", "demo", "--to", "x"},
		`unknown command "frobnicate"`:                              {"frobnicate"},
		"alarms needs a subcommand: list or disarm":                 {"alarms", "demo"},
		"members takes CLUSTER, got 2 argument(s)":                  {"members", "a", "b"},
		"members takes CLUSTER, got 0 argument(s)":                  {"members"},
		`invalid value "soon" for flag -timeout`:                    {"defrag", "demo", "--timeout", "soon"},
		"compact --revision N needs a positive revision":            {"compact", "demo", "--revision", "-3"},
		"defrag --timeout must be positive, got 0s":                 {"defrag", "demo", "--timeout", "0"},
		"defrag --timeout must be positive, got -1m0s":              {"defrag", "demo", "--timeout=-1m"},
		"replace-member --replace-timeout must be positive, got 0s": {"replace-member", "m1", "--replace-timeout", "0s"},
		"snapshot --snapshot-timeout must be positive, got -5s":     {"snapshot", "demo", "--to", "s3://b", "--snapshot-timeout=-5s"},
		"--to must not carry credentials":                           {"snapshot", "demo", "--to", "s3://AKIA:secret@bucket/prefix"},
	}
	for msg, args := range cases {
		g := NewWithT(t)
		w := newWorld(t)
		r := w.run(args...)
		g.Expect(r.code).To(Equal(ExitUsage), "%v", args)
		g.Expect(r.err).To(ContainSubstring("error: "+msg), "%v", args)
		g.Expect(r.err).To(HaveSuffix("See 'kubectl etcd --help' for usage.\n"))
		g.Expect(r.out).To(BeEmpty())
		g.Expect(w.flags).To(BeEmpty(), "%v: a usage error never reaches the cluster", args)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{}, {"--help"}, {"help"}, {"-h", "status"}, {"help", "defrag"}, {"defrag", "demo", "--help"}} {
		g := NewWithT(t)
		w := newWorld(t)
		r := w.run(args...)
		g.Expect(r.code).To(Equal(ExitOK), "%v", args)
		g.Expect(r.err).To(BeEmpty())
		g.Expect(r.out).To(ContainSubstring("-n, --namespace NAME"))
		g.Expect(w.flags).To(BeEmpty())
	}
	g := NewWithT(t)
	r := newWorld(t).run("help", "defrag")
	g.Expect(r.out).To(ContainSubstring("kubectl etcd defrag CLUSTER [flags]"))
	g.Expect(r.out).To(ContainSubstring("--timeout DURATION"))
	r = newWorld(t).run("--help")
	for _, c := range commands {
		g.Expect(r.out).To(ContainSubstring("  "+c.name+" "+c.args+"\n"), "the overview lists every command")
	}
}

func TestDefragTimeoutReachesTheDialer(t *testing.T) {
	g := NewWithT(t)
	var got [][]etcd.Option
	app := &App{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}, NewEnv: func(_ KubeFlags, opts ...etcd.Option) (*Env, error) {
		got = append(got, opts)
		return newWorld(t).env(), nil
	}}
	app.Run(context.Background(), []string{"defrag", "demo", "--timeout", "10m"})
	app.Run(context.Background(), []string{"status", "demo"})
	g.Expect(got).To(HaveLen(2))
	g.Expect(got[0]).To(HaveLen(1), "defrag sets its timeout")
	g.Expect(got[1]).To(BeEmpty(), "other commands keep internal/etcd's defaults")
}

const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: first
  context: {cluster: c, user: u, namespace: first-ns}
- name: second
  context: {cluster: c, user: u}
current-context: first
`

func TestNewEnvResolvesNamespacesLikeKubectl(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		env    string // KUBECONFIG
		flags  KubeFlags
		wantNS string
	}{
		{"KUBECONFIG and the current context's namespace", path, KubeFlags{}, "first-ns"},
		{"--kubeconfig", "/does/not/exist", KubeFlags{Kubeconfig: path}, "first-ns"},
		{"--context without a namespace", path, KubeFlags{Context: "second"}, "default"},
		{"-n wins", path, KubeFlags{Namespace: "mine"}, "mine"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			t.Setenv("KUBECONFIG", tc.env)
			env, err := NewEnv(tc.flags)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(env.Namespace).To(Equal(tc.wantNS))
		})
	}
	t.Run("unknown context", func(t *testing.T) {
		g := NewWithT(t)
		t.Setenv("KUBECONFIG", path)
		_, err := NewEnv(KubeFlags{Context: "nope"})
		g.Expect(err).To(MatchError(ContainSubstring(`context "nope"`)))
	})
}
