package server

import (
	"math"
	"strconv"
	"time"
)

// The dashboard's charts and timelines are SVG drawn on the server: no
// script draws them and no style attribute is needed (the page's policy
// allows neither), only classes and coordinates. This file holds what
// they share: a time scale and its axis.

// timeScale maps the times from T0 to T1 onto the x coordinates X0 to X1.
type timeScale struct {
	T0, T1 time.Time
	X0, X1 float64
}

// newTimeScale returns a scale from t0 to t1 (at least a millisecond
// wide) over x0..x1.
func newTimeScale(t0, t1 time.Time, x0, x1 float64) timeScale {
	if t1.Sub(t0) < time.Millisecond {
		t1 = t0.Add(time.Millisecond)
	}
	return timeScale{T0: t0, T1: t1, X0: x0, X1: x1}
}

// X is the x coordinate of t, clamped to the scale.
func (s timeScale) X(t time.Time) float64 {
	f := float64(t.Sub(s.T0)) / float64(s.T1.Sub(s.T0))
	f = math.Max(0, math.Min(1, f))
	return round1(s.X0 + f*(s.X1-s.X0))
}

// Span is the x and width of the interval from a to b, at least minW wide.
func (s timeScale) Span(a, b time.Time, minW float64) (x, w float64) {
	x = s.X(a)
	w = math.Max(s.X(b)-x, minW)
	if x+w > s.X1 {
		x = math.Max(s.X0, s.X1-w)
	}
	return x, round1(w)
}

// axisTick is one labelled tick of a time axis.
type axisTick struct {
	X     float64
	Label string
}

// tickSteps are the intervals an axis ticks at: the first that gives at
// most the asked-for count of ticks is taken.
var tickSteps = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
	2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 30 * 24 * time.Hour,
}

// Ticks returns the ticks of the axis, at most about n of them, labelled
// by their offset from T0 in a unit fit for the step ("0", "250 ms",
// "1.5 s", "2 min", "3 h", "2 d").
func (s timeScale) Ticks(n int) []axisTick {
	span := s.T1.Sub(s.T0)
	step := tickSteps[len(tickSteps)-1]
	for _, st := range tickSteps {
		if span/st <= time.Duration(max(n, 1)) {
			step = st
			break
		}
	}
	var out []axisTick
	for d := time.Duration(0); d <= span; d += step {
		out = append(out, axisTick{X: s.X(s.T0.Add(d)), Label: offsetLabel(d, step)})
	}
	return out
}

// offsetLabel writes d in the unit of step: ms below a second, s below a
// minute, min below an hour, h below a day, d beyond.
func offsetLabel(d, step time.Duration) string {
	if d == 0 {
		return "0"
	}
	unit, name := time.Millisecond, "ms"
	switch {
	case step >= 24*time.Hour:
		unit, name = 24*time.Hour, "d"
	case step >= time.Hour:
		unit, name = time.Hour, "h"
	case step >= time.Minute:
		unit, name = time.Minute, "min"
	case step >= time.Second:
		unit, name = time.Second, "s"
	case step >= 100*time.Millisecond && d >= time.Second:
		unit, name = time.Second, "s"
	}
	v := float64(d) / float64(unit)
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + " " + name
}

// durLabel writes a duration for a person, in one unit with at most one
// decimal: "340 ms", "2.5 s", "4.2 min", "1.5 h", "3 d".
func durLabel(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return "<1 ms"
	case d < time.Second:
		return offsetLabel(d, time.Millisecond)
	case d < time.Minute:
		return offsetLabel(d, time.Second)
	case d < time.Hour:
		return offsetLabel(d, time.Minute)
	case d < 24*time.Hour:
		return offsetLabel(d, time.Hour)
	default:
		return offsetLabel(d, 24*time.Hour)
	}
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }
