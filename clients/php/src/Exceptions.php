<?php

declare(strict_types=1);

namespace Sluice;

/** Base of the client's exceptions. */
class SluiceException extends \RuntimeException
{
}

/**
 * The service did not decide: it could not be reached, did not answer
 * within the timeout, answered something that is not its JSON, or its
 * store failed. Decisions come back as the failure policy's, with this
 * exception as their error; calls that settle throw it.
 */
class Unavailable extends SluiceException
{
}

/**
 * The service refused the request (a 4xx): an unknown rule, a cost above
 * the rule's burst, an unknown reservation. The message names the rule
 * and repeats the service's reason.
 */
class InvalidRequest extends SluiceException
{
    public function __construct(string $message, public readonly int $status, public readonly string $rule)
    {
        parent::__construct($message, $status);
    }
}

/**
 * A key is over its rule's limit: thrown by RateLimiter::check and
 * attempt, carrying the wait in seconds.
 */
class RateLimitExceeded extends SluiceException
{
    public function __construct(public readonly Decision $decision)
    {
        parent::__construct(sprintf(
            'sluice: %s over its limit %s; retry in %ds',
            $decision->rule !== '' ? "rule '{$decision->rule}':" : 'key',
            $decision->policy,
            $decision->retryAfterSeconds(),
        ));
    }

    /** The wait in seconds (fractional, rounded up to the millisecond). */
    public function getRetryAfter(): float
    {
        return $this->decision->retryAfter;
    }
}
