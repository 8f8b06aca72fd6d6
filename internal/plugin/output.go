package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/quorumctl/etcd-operator/internal/maintenance"
)

// Output formats of -o.
const (
	OutputTable = "table"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

func checkOutput(format string) error {
	switch format {
	case OutputTable, OutputJSON, OutputYAML:
		return nil
	}
	return usagef("unknown output format %q: use %s, %s or %s", format, OutputTable, OutputJSON, OutputYAML)
}

// printStructured prints v as json or yaml; it reports false for table, which
// each command renders itself.
func printStructured(w io.Writer, format string, v any) (bool, error) {
	switch format {
	case OutputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return true, fmt.Errorf("failed to write JSON: %w", err)
		}
		return true, nil
	case OutputYAML:
		// sigs.k8s.io/yaml goes through the json tags, so both formats
		// share one schema.
		b, err := yaml.Marshal(v)
		if err != nil {
			return true, fmt.Errorf("failed to encode YAML: %w", err)
		}
		if _, err := w.Write(b); err != nil {
			return true, fmt.Errorf("failed to write YAML: %w", err)
		}
		return true, nil
	}
	return false, nil
}

// table collects rows and aligns them like kubectl get does.
type table struct {
	rows [][]string
}

func newTable(header ...string) *table { return &table{rows: [][]string{header}} }

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	for _, r := range t.rows {
		if _, err := fmt.Fprintln(tw, strings.Join(r, "\t")); err != nil {
			return fmt.Errorf("failed to write table: %w", err)
		}
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("failed to write table: %w", err)
	}
	return nil
}

// orDash keeps empty cells visible, so columns stay aligned and readers can
// tell "nothing" from a rendering glitch.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// humanBytes renders n in binary units with one decimal, as etcd's own
// quota (--quota-backend-bytes) is usually given in powers of two.
func humanBytes(n int64) string { return maintenance.FormatBytes(n) }
