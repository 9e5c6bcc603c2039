package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/bulkhead-dc/bulkhead/api"
	"github.com/bulkhead-dc/bulkhead/topview"
	"github.com/spf13/cobra"
)

func newTopCmd() *cobra.Command {
	var (
		cf       clientFlags
		interval time.Duration
		once     bool
	)
	cmd := &cobra.Command{
		Use:   "top",
		Short: "Watch every tenant against its guarantee, refreshed in the terminal",
		Long: `Show the controller's tenants as a table that refreshes every --interval:
each tenant's guarantee, what it received in the latest interval (and as
a percentage of its guarantee), its compliance so far and a sparkline of
the last frames. Tenants below their guarantee come first, marked with
'!' (in reverse video on a terminal); the header counts them and the
agents connected and silent. Ctrl-C ends it. --once prints one frame
(for scripts).`,
		Example: `  bulkhead top
  bulkhead top --interval 1s
  bulkhead top --once`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval < 100*time.Millisecond {
				return errors.New("top: --interval must be at least 100ms")
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			tty := false
			if f, ok := w.(*os.File); ok {
				if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
					tty = true
				}
			}
			v := topview.New()
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				tenants, err := c.List(cmd.Context(), api.KindTenant)
				if err != nil {
					return err
				}
				hosts, err := c.List(cmd.Context(), api.KindHost)
				if err != nil {
					return err
				}
				if tty && !once {
					fmt.Fprint(w, "\x1b[H\x1b[2J") // home, clear
				}
				if err := v.Render(w, topview.Frame{At: time.Now(), Tenants: tenants, Hosts: hosts, Color: tty}); err != nil {
					return err
				}
				if once {
					return nil
				}
				if !tty {
					fmt.Fprintln(w)
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-t.C:
				}
			}
		},
	}
	cf.add(cmd)
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "refresh period")
	cmd.Flags().BoolVar(&once, "once", false, "print one frame and exit")
	return cmd
}
