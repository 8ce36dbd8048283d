package hopperotel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/hopper-go/hopper"
	"github.com/hopper-go/hopper/hopperotel"
)

// TestMetrics: inserts count in messaging.client.sent.messages by queue
// and type; attempts in messaging.client.consumed.messages and
// messaging.process.duration (seconds) by queue, type and outcome, with
// error.type for failures; no id anywhere.
func TestMetrics(t *testing.T) {
	t.Parallel()
	ok := hopper.Define("otel-double", double, nil)
	bad := hopper.Define("otel-bad", func(context.Context, int) (int, error) { return 0, errors.New("no") },
		&hopper.TypeOpts[int]{Retry: hopper.RetryPolicy{Attempts: 1}})
	b := setup(t, nil, ok, bad)
	ctx := testCtx(t)

	hs, err := ok.EnqueueMany(ctx, b.c, []int{1, 2}, nil)
	require.NoError(t, err)
	for _, h := range hs {
		_, err := h.Result(ctx)
		require.NoError(t, err)
	}
	h, err := bad.Enqueue(ctx, b.c, 1, nil)
	require.NoError(t, err)
	_, err = h.Result(ctx)
	require.Error(t, err)

	var rm metricdata.ResourceMetrics
	require.NoError(t, b.reader.Collect(ctx, &rm))
	require.Len(t, rm.ScopeMetrics, 1)
	scope := rm.ScopeMetrics[0]
	require.Equal(t, hopperotel.ScopeName, scope.Scope.Name)
	require.Equal(t, semconv.SchemaURL, scope.Scope.SchemaURL)
	metrics := map[string]metricdata.Metrics{}
	for _, m := range scope.Metrics {
		metrics[m.Name] = m
	}
	require.Len(t, metrics, 3)

	queue := semconv.MessagingDestinationName(hopper.DefaultQueue)
	send, process := semconv.MessagingOperationName("send"), semconv.MessagingOperationName("process")
	okKind, badKind := hopperotel.KindKey.String("otel-double"), hopperotel.KindKey.String("otel-bad")
	succeeded, failed := hopperotel.OutcomeKey.String(hopperotel.OutcomeSucceeded), hopperotel.OutcomeKey.String(hopperotel.OutcomeFailed)
	handler := semconv.ErrorTypeKey.String("handler")
	set := attribute.NewSet

	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "messaging.client.sent.messages", Description: "Jobs inserted.", Unit: "{job}",
		Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: []metricdata.DataPoint[int64]{
			{Attributes: set(system, send, queue, okKind), Value: 2},
			{Attributes: set(system, send, queue, badKind), Value: 1},
		}},
	}, metrics["messaging.client.sent.messages"], metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())

	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "messaging.client.consumed.messages", Description: "Attempts run, by outcome.", Unit: "{job}",
		Data: metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true, DataPoints: []metricdata.DataPoint[int64]{
			{Attributes: set(system, process, queue, okKind, succeeded), Value: 2},
			{Attributes: set(system, process, queue, badKind, failed, handler), Value: 1},
		}},
	}, metrics["messaging.client.consumed.messages"], metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())

	// Durations are measured: compare their series, then their counts.
	duration := metrics["messaging.process.duration"]
	metricdatatest.AssertEqual(t, metricdata.Metrics{
		Name: "messaging.process.duration", Description: "Duration of attempts, by outcome.", Unit: "s",
		Data: metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality, DataPoints: []metricdata.HistogramDataPoint[float64]{
			{Attributes: set(system, process, queue, okKind, succeeded)},
			{Attributes: set(system, process, queue, badKind, failed, handler)},
		}},
	}, duration, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars(), metricdatatest.IgnoreValue())
	counts := map[string]uint64{}
	for _, dp := range duration.Data.(metricdata.Histogram[float64]).DataPoints {
		kind, _ := dp.Attributes.Value(hopperotel.KindKey)
		counts[kind.AsString()] = dp.Count
		require.Equal(t, []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}, dp.Bounds)
		lo, ok := dp.Min.Value()
		require.True(t, ok)
		require.GreaterOrEqual(t, lo, 0.0)
	}
	require.Equal(t, map[string]uint64{"otel-double": 2, "otel-bad": 1}, counts)
}
