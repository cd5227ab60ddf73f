package rlqs

import (
	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// action returns the bucket action of a for the bucket id: a
// QuotaAssignmentAction of a token bucket (the share, filled every
// period, as deep as its tokens) or of a blanket rule, living a.ttl.
// The token bucket is the strategy Envoy's filter applies (it does not
// apply RequestsPerTimeUnit), and it reads whole seconds of the TTL and
// of the fill interval, which the configuration guarantees.
func action(id *rlqspb.BucketId, a answer) *rlqspb.RateLimitQuotaResponse_BucketAction {
	st := &typev3.RateLimitStrategy{}
	switch a.kind {
	case assign:
		st.Strategy = &typev3.RateLimitStrategy_TokenBucket{TokenBucket: &typev3.TokenBucket{
			MaxTokens:     uint32(a.tokens),
			TokensPerFill: wrapperspb.UInt32(uint32(a.rate)),
			FillInterval:  durationpb.New(a.period),
		}}
	case allowAll:
		st.Strategy = &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_ALLOW_ALL}
	default:
		st.Strategy = &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: typev3.RateLimitStrategy_DENY_ALL}
	}
	return &rlqspb.RateLimitQuotaResponse_BucketAction{
		BucketId: id,
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqspb.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(a.ttl),
				RateLimitStrategy:    st,
			},
		},
	}
}

// abandon returns the AbandonAction of the bucket id.
func abandon(id *rlqspb.BucketId) *rlqspb.RateLimitQuotaResponse_BucketAction {
	return &rlqspb.RateLimitQuotaResponse_BucketAction{
		BucketId:     id,
		BucketAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction_{AbandonAction: &rlqspb.RateLimitQuotaResponse_BucketAction_AbandonAction{}},
	}
}
