<?php

declare(strict_types=1);

namespace Sluice;

/**
 * The service's answer to a check, peek, insert or outcome call. Times
 * are seconds. $headers are the RateLimit and RateLimit-Policy fields
 * the service sent, to copy onto a response. $error is set when the
 * service did not decide and the failure policy did.
 */
final class Decision
{
    /** @param array<string,string> $headers */
    public function __construct(
        public readonly bool $allowed,
        public readonly string $rule = '',
        public readonly int $limit = 0,
        public readonly string $policy = '',
        public readonly int $remaining = 0,
        public readonly float $resetAfter = 0.0,
        public readonly float $retryAfter = 0.0,
        public readonly bool $shadowed = false,
        public readonly string $guard = '',
        public readonly bool $duplicate = false,
        public readonly array $headers = [],
        public readonly ?Unavailable $error = null,
    ) {
    }

    /** The wait in whole seconds, rounded up, for a Retry-After field. */
    public function retryAfterSeconds(): int
    {
        return max(0, (int) ceil($this->retryAfter));
    }
}
