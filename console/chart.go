package console

import (
	"encoding/json"
	"fmt"

	"github.com/cairnq/cairnq-go/internal/engine"
)

// The overview's chart: one stacked bar per minute, succeeded above failed,
// drawn as SVG on the server (no script, no library).
const (
	chartBarW   = 10
	chartGap    = 2
	chartHeight = 120
)

type chart struct {
	Width, Height int
	Bars          []bar
	Max           int
	Succeeded     int
	Failed        int
	// YTicks are the y axis's labels, top first (the peak, half of it,
	// 0), and Mid the height of the half's gridline; XTicks the x axis's,
	// evenly spaced from the first minute to the last, in UTC.
	YTicks []int
	Mid    int
	XTicks []string
}

// chartXTicks is how many times the chart's x axis shows.
const chartXTicks = 5

type bar struct {
	X, W       int
	OkY, OkH   int
	BadY, BadH int
	Label      string
}

func newChart(ms []engine.ConsoleMinute) chart {
	c := chart{Height: chartHeight, Width: max(len(ms), 1) * (chartBarW + chartGap)}
	for _, m := range ms {
		c.Max = max(c.Max, m.Succeeded+m.Failed)
		c.Succeeded += m.Succeeded
		c.Failed += m.Failed
	}
	scale := 0.0
	if c.Max > 0 {
		scale = float64(chartHeight) / float64(c.Max)
	}
	c.YTicks, c.Mid = []int{c.Max, c.Max / 2, 0}, chartHeight/2
	if c.Max%2 != 0 {
		c.YTicks[1] = -1 // no whole number at half height: the template leaves it blank
	}
	if n := len(ms); n > 0 {
		for i := range chartXTicks {
			c.XTicks = append(c.XTicks, ms[i*(n-1)/(chartXTicks-1)].Minute.UTC().Format("15:04"))
		}
		c.XTicks[len(c.XTicks)-1] += " UTC"
	}
	for i, m := range ms {
		badH := int(float64(m.Failed)*scale + 0.5)
		okH := int(float64(m.Succeeded)*scale + 0.5)
		if m.Failed > 0 && badH == 0 {
			badH = 1
		}
		if m.Succeeded > 0 && okH == 0 {
			okH = 1
		}
		b := bar{X: i * (chartBarW + chartGap), W: chartBarW,
			BadY: chartHeight - badH, BadH: badH,
			OkY: chartHeight - badH - okH, OkH: okH,
			Label: fmt.Sprintf("%s: %d succeeded, %d failed", m.Minute.UTC().Format("15:04 UTC"), m.Succeeded, m.Failed),
		}
		c.Bars = append(c.Bars, b)
	}
	return c
}

func jsonMarshal(v any) (json.RawMessage, error) { return json.Marshal(v) }
