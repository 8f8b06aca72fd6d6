package plugin

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/quorumctl/etcd-operator/internal/etcd"
)

// DefaultDefragTimeout bounds the defragmentation of one member. etcd
// rewrites the whole database file, which for a database of a few GiB on a
// slow disk takes minutes; the operator's own default is tuned for
// reconcile loops, not for this.
const DefaultDefragTimeout = 5 * time.Minute

// Exit statuses.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// App runs the plugin's commands.
type App struct {
	Out, Err io.Writer
	// NewEnv connects to the cluster the flags select; NewEnv in this
	// package is the real one.
	NewEnv func(KubeFlags, ...etcd.Option) (*Env, error)
}

type options struct {
	kube     KubeFlags
	tls      TLSFlags
	output   string
	revision int64
	to       string
	timeout  time.Duration
	wait     bool
	// replaceTimeout bounds replace-member's wait.
	replaceTimeout time.Duration
	recover        recoverOptions
	restore        restoreOptions
	snapshot       snapshotOptions
	// snapshotTimeout bounds snapshot's wait.
	snapshotTimeout time.Duration
	// keepOldCA: rotate-ca holds the rotation before the old CA is dropped.
	keepOldCA bool
}

type command struct {
	name     string // words after "kubectl etcd"
	args     string // positional arguments and required flags
	summary  string
	min, max int // positional argument count
	flags    func(fs *flag.FlagSet, o *options)
	help     string // the flags, for usage
	run      func(ctx context.Context, env *Env, w io.Writer, o *options, args []string) error
}

func outputFlag(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.output, "o", OutputTable, "")
	fs.StringVar(&o.output, "output", OutputTable, "")
}

const outputHelp = "  -o, --output FORMAT   table, json or yaml (default table); json and yaml have\n" +
	"                        stable field names and give sizes in bytes\n"

var commands = []command{
	{
		name: "status", args: "[CLUSTER]", max: 1, flags: outputFlag, help: outputHelp,
		summary: "Show every member's role, leadership, version, DB size, raft term and\nindex, alarms and Pod readiness; without CLUSTER, of each EtcdCluster.",
		run: func(ctx context.Context, env *Env, w io.Writer, o *options, args []string) error {
			return runStatus(ctx, env, w, o.output, args)
		},
	},
	{
		name: "members", args: "CLUSTER", min: 1, max: 1, flags: outputFlag, help: outputHelp,
		summary: "Show etcd's own member list: ID, name, peer and client URLs, learner.",
		run: func(ctx context.Context, env *Env, w io.Writer, o *options, args []string) error {
			return runMembers(ctx, env, w, o.output, args[0])
		},
	},
	{
		name: "alarms list", args: "CLUSTER", min: 1, max: 1, flags: outputFlag, help: outputHelp,
		summary: "Show the active alarms.",
		run: func(ctx context.Context, env *Env, w io.Writer, o *options, args []string) error {
			return runAlarmList(ctx, env, w, o.output, args[0])
		},
	},
	{
		name: "alarms disarm", args: "CLUSTER", min: 1, max: 1,
		summary: "Disarm every active alarm and report each one.",
		run: func(ctx context.Context, env *Env, w io.Writer, _ *options, args []string) error {
			return runAlarmDisarm(ctx, env, w, args[0])
		},
	},
	{
		name: "compact", args: "CLUSTER [--revision N]", min: 1, max: 1,
		summary: "Compact the key space, discarding history before revision N.",
		flags: func(fs *flag.FlagSet, o *options) {
			fs.Int64Var(&o.revision, "revision", 0, "")
		},
		help: "  --revision N          the revision to compact to (default: the current revision)\n",
		run: func(ctx context.Context, env *Env, w io.Writer, o *options, args []string) error {
			return runCompact(ctx, env, w, args[0], o.revision)
		},
	},
	{
		name: "defrag", args: "CLUSTER", min: 1, max: 1,
		summary: "Defragment one member at a time in the operator's order: followers first, the leader last,\nafter it hands leadership over. Reports what the operator's rule makes of each member.\nRefuses unless every member answers and there is a leader, and under a CORRUPT alarm; NOSPACE does not stop it.",
		flags: func(fs *flag.FlagSet, o *options) {
			fs.DurationVar(&o.timeout, "timeout", DefaultDefragTimeout, "")
		},
		help: "  --timeout DURATION    how long one member's defragmentation may take (default " + DefaultDefragTimeout.String() + ")\n",
		run: func(ctx context.Context, env *Env, w io.Writer, _ *options, args []string) error {
			return runDefrag(ctx, env, w, args[0])
		},
	},
	{
		name: "replace-member", args: "MEMBER", min: 1, max: 1,
		summary: "Replace one member by a new one: delete its EtcdMember, which the operator\nremoves from etcd once the other voters keep a quorum, and wait until the\ncluster is Ready again with a fresh member in its place.",
		flags: func(fs *flag.FlagSet, o *options) {
			fs.BoolVar(&o.wait, "wait", true, "")
			fs.DurationVar(&o.replaceTimeout, "replace-timeout", DefaultReplaceTimeout, "")
		},
		help: "  --wait                wait until the cluster is Ready without the member (default true)\n" +
			"  --replace-timeout D   how long to wait (default " + DefaultReplaceTimeout.String() + ")\n",
		run: func(ctx context.Context, env *Env, w io.Writer, o *options, args []string) error {
			return runReplaceMember(ctx, env, w, args[0], o.wait, o.replaceTimeout)
		},
	},
	{
		name: "recover", args: "CLUSTER --from-survivor [--member NAME] | --from-snapshot [--snapshot NAME]", min: 1, max: 1,
		summary: "Recover a cluster whose quorum is lost for good: create an EtcdRecovery,\nprint the plan the operator records (what is kept, what is lost) and wait\nuntil the cluster is Ready again. The operator refuses while a quorum\nanswers, and a named survivor behind another unless --force.",
		flags: func(fs *flag.FlagSet, o *options) {
			fs.BoolVar(&o.recover.fromSurvivor, "from-survivor", false, "")
			fs.BoolVar(&o.recover.fromSnapshot, "from-snapshot", false, "")
			fs.StringVar(&o.recover.member, "member", "", "")
			fs.StringVar(&o.recover.snapshot, "snapshot", "", "")
			fs.DurationVar(&o.recover.maxAge, "max-age", 0, "")
			fs.StringVar(&o.recover.encryptionKey, "encryption-key", "", "")
			fs.BoolVar(&o.recover.force, "force", false, "")
			fs.BoolVar(&o.recover.wait, "wait", true, "")
			fs.DurationVar(&o.recover.timeout, "recover-timeout", DefaultRecoverTimeout, "")
		},
		help: "  --from-survivor       restart one member that kept its data as a one-member\n" +
			"                        cluster (same cluster ID) and grow back from it\n" +
			"  --member NAME         the member to recover from (default: the one furthest ahead)\n" +
			"  --from-snapshot       rebuild the cluster from an EtcdSnapshot (new cluster ID)\n" +
			"  --snapshot NAME       the EtcdSnapshot (default: the latest successful one)\n" +
			"  --max-age DURATION    refuse a snapshot older than this\n" +
			"  --encryption-key SECRET/KEY  the Secret key holding an encrypted snapshot's\n" +
			"                        age identity; checked before anything changes\n" +
			"  --force               use a survivor behind another, or an old snapshot, anyway\n" +
			"  --wait                wait until the cluster is Ready again (default true)\n" +
			"  --recover-timeout D   how long to wait (default " + DefaultRecoverTimeout.String() + ")\n",
		run: func(ctx context.Context, env *Env, w io.Writer, o *options, args []string) error {
			return runRecover(ctx, env, w, args[0], o.recover)
		},
	},
	{
		name: "restore", args: "NEW-CLUSTER --schedule NAME --as-of TIME", min: 1, max: 1,
		summary: "Create a new cluster from the newest successful snapshot of a schedule that\ncompleted before TIME (RFC 3339), and wait until it is Ready. It gets the\nmember template and size of the cluster the schedule snapshots, if that\ncluster still exists. The operator latches its choice in status.restoreChoice.",
		flags: func(fs *flag.FlagSet, o *options) {
			fs.StringVar(&o.restore.schedule, "schedule", "", "")
			fs.StringVar(&o.restore.asOf, "as-of", "", "")
			fs.StringVar(&o.restore.version, "version", "", "")
			fs.IntVar(&o.restore.replicas, "replicas", 0, "")
			fs.BoolVar(&o.restore.wait, "wait", true, "")
			fs.DurationVar(&o.restore.timeout, "restore-timeout", DefaultRestoreTimeout, "")
		},
		help: "  --schedule NAME       the EtcdSnapshotSchedule whose snapshots are considered (required)\n" +
			"  --as-of TIME          an RFC 3339 time such as 2026-12-07T01:00:00Z: the snapshot\n" +
			"                        restored completed before it, so it holds no later write (required)\n" +
			"  --replicas N          members of the new cluster (default: the source cluster's, or 3)\n" +
			"  --version VERSION     etcd version of the new cluster (default: the source cluster's)\n" +
			"  --wait                wait until the cluster is Ready (default true)\n" +
			"  --restore-timeout D   how long to wait (default " + DefaultRestoreTimeout.String() + ")\n",
		run: func(ctx context.Context, env *Env, w io.Writer, o *options, args []string) error {
			return runRestore(ctx, env, w, args[0], o.restore)
		},
	},
	{
		name: "snapshot", args: "CLUSTER --to DESTINATION", min: 1, max: 1,
		summary: "Take one snapshot: create an EtcdSnapshot and wait until the operator has\nstored and verified it. DESTINATION is s3://BUCKET[/PREFIX] or pvc://CLAIM[/PATH].",
		flags: func(fs *flag.FlagSet, o *options) {
			fs.StringVar(&o.snapshot.to, "to", "", "")
			fs.StringVar(&o.snapshot.name, "name", "", "")
			fs.StringVar(&o.snapshot.endpoint, "s3-endpoint", "", "")
			fs.StringVar(&o.snapshot.region, "s3-region", "", "")
			fs.StringVar(&o.snapshot.credential, "s3-credentials-secret", "", "")
			fs.StringVar(&o.snapshot.caConfigMap, "s3-ca-configmap", "", "")
			fs.BoolVar(&o.snapshot.pathStyle, "s3-path-style", false, "")
			fs.BoolVar(&o.snapshot.insecure, "s3-insecure", false, "")
			fs.BoolVar(&o.wait, "wait", true, "")
			fs.DurationVar(&o.snapshotTimeout, "snapshot-timeout", DefaultSnapshotTimeout, "")
		},
		help: "  --to DESTINATION      s3://BUCKET[/PREFIX] or pvc://CLAIM[/PATH] (required)\n" +
			"  --name NAME           the EtcdSnapshot's name (default CLUSTER-YYYYMMDD-HHMMSS)\n" +
			"  --s3-endpoint URL     the S3 server (default: AWS's for the region)\n" +
			"  --s3-region REGION    the bucket's region (default us-east-1)\n" +
			"  --s3-credentials-secret NAME\n" +
			"                        a Secret with accessKeyID and secretAccessKey (default: ambient credentials)\n" +
			"  --s3-ca-configmap NAME\n" +
			"                        a ConfigMap whose ca.crt signs the endpoint's certificate\n" +
			"  --s3-path-style       address the bucket as ENDPOINT/BUCKET, as most S3-compatible servers need\n" +
			"  --s3-insecure         allow an http:// --s3-endpoint: the snapshot crosses the network in clear\n" +
			"  --wait                wait until the snapshot succeeded or failed (default true)\n" +
			"  --snapshot-timeout D  how long to wait (default " + DefaultSnapshotTimeout.String() + ")\n",
		run: func(ctx context.Context, env *Env, w io.Writer, o *options, args []string) error {
			return runSnapshot(ctx, env, w, args[0], o.snapshot, o.wait, o.snapshotTimeout, time.Now())
		},
	},
	{
		name: "snapshots", args: "CLUSTER", min: 1, max: 1, flags: outputFlag, help: outputHelp,
		summary: "List the cluster's EtcdSnapshots, newest first: phase, reason, revision,\nsize, when it completed and where it is stored.",
		run: func(ctx context.Context, env *Env, w io.Writer, o *options, args []string) error {
			return runSnapshots(ctx, env, w, o.output, args[0])
		},
	},
	{
		name: "rotate-ca", args: "CLUSTER [--keep-old-ca]", min: 1, max: 1,
		summary: "Ask the operator to rotate the cluster's operator-managed CAs: members restart\none at a time to trust the old and the new CA, certificates switch, members\nrestart again to trust the new CA alone. Clients holding copies of\n<cluster>-admin-client must load its new ca.crt, then its new certificate.",
		flags: func(fs *flag.FlagSet, o *options) {
			fs.BoolVar(&o.keepOldCA, "keep-old-ca", false, "")
		},
		help: "  --keep-old-ca         hold the rotation once every member serves certificates of the\n" +
			"                        new CA, before members stop trusting the old one, for clients\n" +
			"                        that cannot reload their CA; lift it with release-old-ca\n",
		run: func(ctx context.Context, env *Env, w io.Writer, o *options, args []string) error {
			return runRotateCA(ctx, env, w, args[0], o.keepOldCA, time.Now())
		},
	},
	{
		name: "release-old-ca", args: "CLUSTER", min: 1, max: 1,
		summary: "Lift the hold rotate-ca --keep-old-ca set (the etcd.quorumctl.io/keep-old-ca\nannotation): members restart one at a time to trust the new CA alone, so every\nclient must present a certificate of the new CA first. Changes nothing without a hold.",
		run: func(ctx context.Context, env *Env, w io.Writer, _ *options, args []string) error {
			return runReleaseOldCA(ctx, env, w, args[0])
		},
	},
	{
		name: "release-plaintext", args: "CLUSTER", min: 1, max: 1,
		summary: "Say that no client uses plaintext any more while TLS is being turned on (the\netcd.quorumctl.io/release-plaintext annotation): members restart one at a time to\nserve TLS alone. Refused until every member serves https (phase ClientsMaySwitch).",
		run: func(ctx context.Context, env *Env, w io.Writer, _ *options, args []string) error {
			return runReleasePlaintext(ctx, env, w, args[0], time.Now())
		},
	},
	{
		name: "move-leader", args: "CLUSTER --to MEMBER", min: 1, max: 1,
		summary: "Hand the leadership to MEMBER, given by name or hex ID.",
		flags: func(fs *flag.FlagSet, o *options) {
			fs.StringVar(&o.to, "to", "", "")
		},
		help: "  --to MEMBER           the member to lead, by name or hex ID (required)\n",
		run: func(ctx context.Context, env *Env, w io.Writer, o *options, args []string) error {
			return runMoveLeader(ctx, env, w, args[0], o.to)
		},
	},
}

func globalFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.tls.CACert, "cacert", "", "")
	fs.StringVar(&o.tls.Cert, "cert", "", "")
	fs.StringVar(&o.tls.Key, "key", "", "")
	fs.StringVar(&o.kube.Kubeconfig, "kubeconfig", "", "")
	fs.StringVar(&o.kube.Context, "context", "", "")
	fs.StringVar(&o.kube.Namespace, "n", "", "")
	fs.StringVar(&o.kube.Namespace, "namespace", "", "")
}

const globalHelp = `Global flags:
  --kubeconfig PATH     kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)
  --context NAME        kubeconfig context (default: the current context)
  -n, --namespace NAME  namespace of the EtcdCluster (default: the context's)
  --cacert, --cert, --key FILE
                        your own client certificate for a TLS cluster (default:
                        one the operator issues on request, or <cluster>-admin-client)
`

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// We print usage and errors ourselves, once, in kubectl's style.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// Run executes the command line (without the program name) and returns the
// exit status.
func (a *App) Run(ctx context.Context, args []string) int {
	err := a.run(ctx, args)
	var usage *usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &usage):
		_, _ = fmt.Fprintf(a.Err, "error: %v\nSee 'kubectl etcd --help' for usage.\n", err)
		return ExitUsage
	}
	_, _ = fmt.Fprintf(a.Err, "error: %v\n", err)
	return ExitError
}

func (a *App) run(ctx context.Context, args []string) error {
	cmd, o, rest, err := parse(args)
	if errors.Is(err, flag.ErrHelp) {
		_, err := io.WriteString(a.Out, usageText(cmd))
		return err
	}
	if err != nil {
		return err
	}
	var dialOpts []etcd.Option
	if o.timeout > 0 {
		dialOpts = append(dialOpts, etcd.WithDefragmentTimeout(o.timeout))
	}
	env, err := a.NewEnv(o.kube, dialOpts...)
	if err != nil {
		return err
	}
	env.TLS = o.tls
	return cmd.run(ctx, env, a.Out, o, rest)
}

// parse finds the command and parses its flags. Flags may come before, among
// or after the arguments, as with kubectl. A help request returns
// flag.ErrHelp and the command it is about, if any.
func parse(args []string) (*command, *options, []string, error) {
	// First pass: find the command words, with a flag set that knows every
	// flag so that flag values are not mistaken for them.
	all := newFlagSet("kubectl etcd")
	var scratch options
	globalFlags(all, &scratch)
	for _, c := range commands {
		if c.flags == nil {
			continue
		}
		// Several commands share -o; flag panics on a second definition.
		own := newFlagSet(c.name)
		c.flags(own, &scratch)
		own.VisitAll(func(f *flag.Flag) {
			if all.Lookup(f.Name) == nil {
				all.Var(f.Value, f.Name, f.Usage)
			}
		})
	}
	words, err := parseInterspersed(all, args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return nil, nil, nil, usagef("%v", err)
	}
	if len(words) > 0 && words[0] == "help" {
		cmd, _ := lookup(words[1:])
		return cmd, nil, nil, flag.ErrHelp
	}
	cmd, n := lookup(words)
	if errors.Is(err, flag.ErrHelp) || len(words) == 0 {
		return cmd, nil, nil, flag.ErrHelp
	}
	if cmd == nil {
		if words[0] == "alarms" {
			return nil, nil, nil, usagef("alarms needs a subcommand: list or disarm")
		}
		return nil, nil, nil, usagef("unknown command %q", words[0])
	}

	o := &options{}
	fs := newFlagSet("kubectl etcd " + cmd.name)
	globalFlags(fs, o)
	if cmd.flags != nil {
		cmd.flags(fs, o)
	}
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cmd, nil, nil, err
		}
		return nil, nil, nil, usagef("%s: %v", cmd.name, err)
	}
	positional = positional[n:]
	if len(positional) < cmd.min || len(positional) > cmd.max {
		return nil, nil, nil, usagef("%s takes %s, got %d argument(s)", cmd.name, cmd.args, len(positional))
	}
	return cmd, o, positional, validate(cmd, o)
}

func validate(cmd *command, o *options) error {
	// A zero or negative wait would end the command before it began, and
	// report a failure that never happened.
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{{"--timeout", o.timeout}, {"--replace-timeout", o.replaceTimeout}, {"--snapshot-timeout", o.snapshotTimeout}, {"--restore-timeout", o.restore.timeout}} {
		if d.value < 0 || (d.value == 0 && commandHas(cmd, d.flag)) {
			return usagef("%s %s must be positive, got %s", cmd.name, d.flag, d.value)
		}
	}
	switch cmd.name {
	case "compact":
		if o.revision < 0 {
			return usagef("compact --revision N needs a positive revision (or none, for the current one)")
		}
	case "move-leader":
		if o.to == "" {
			return usagef("move-leader needs --to MEMBER, a member name or hex ID")
		}
	case "recover":
		return validateRecover(o.recover)
	case "restore":
		if err := validateRestore(o.restore); err != nil {
			return err
		}
	case "snapshot":
		if o.snapshot.to == "" {
			return usagef("snapshot needs --to DESTINATION: s3://BUCKET[/PREFIX] or pvc://CLAIM[/PATH]")
		}
		if _, err := parseDestination(o.snapshot); err != nil {
			return err
		}
	}
	if o.output != "" {
		return checkOutput(o.output)
	}
	return nil
}

// commandHas reports whether the command defines the flag (given with its
// dashes). The duration flags all default to a positive value, so one that
// the command defines and that reads zero was set to zero.
func commandHas(cmd *command, flagName string) bool {
	if cmd.flags == nil {
		return false
	}
	fs := newFlagSet(cmd.name)
	cmd.flags(fs, &options{})
	return fs.Lookup(strings.TrimLeft(flagName, "-")) != nil
}

// lookup matches the longest command name at the start of words.
func lookup(words []string) (*command, int) {
	for n := min(2, len(words)); n > 0; n-- {
		name := strings.Join(words[:n], " ")
		for i := range commands {
			if commands[i].name == name {
				return &commands[i], n
			}
		}
	}
	return nil, 0
}

// parseInterspersed parses flags wherever they appear among the positional
// arguments, which the flag package alone stops at.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return positional, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		// Parse swallows a "--" terminator; everything after it is positional.
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

func usageText(cmd *command) string {
	var b strings.Builder
	if cmd != nil {
		fmt.Fprintf(&b, "%s\n\nUsage:\n  kubectl etcd %s %s [flags]\n\n", cmd.summary, cmd.name, cmd.args)
		if cmd.help != "" {
			b.WriteString("Flags:\n" + cmd.help + "\n")
		}
	} else {
		b.WriteString("kubectl etcd inspects and maintains the etcd clusters run by the etcd operator,\n")
		b.WriteString("reaching their members through the API server's port-forwarding only.\n\nCommands:\n")
		for _, c := range commands {
			fmt.Fprintf(&b, "  %s %s\n", c.name, c.args)
			for line := range strings.SplitSeq(c.summary, "\n") {
				fmt.Fprintf(&b, "      %s\n", line)
			}
		}
		b.WriteString("\nRun 'kubectl etcd help COMMAND' for a command's flags.\n\n")
	}
	b.WriteString(globalHelp)
	return b.String()
}
