<?php

// For applications without Composer: require this file. The middleware
// needs the PSR-7, PSR-15 and PSR-17 interfaces (Composer's psr/* packages,
// or the psr extension), and is loaded only when used.
spl_autoload_register(static function (string $class): void {
    static $files = [
        'Sluice\\Client' => 'Client.php',
        'Sluice\\Decision' => 'Decision.php',
        'Sluice\\RateLimiter' => 'RateLimiter.php',
        'Sluice\\Middleware' => 'Middleware.php',
        'Sluice\\SluiceException' => 'Exceptions.php',
        'Sluice\\Unavailable' => 'Exceptions.php',
        'Sluice\\InvalidRequest' => 'Exceptions.php',
        'Sluice\\RateLimitExceeded' => 'Exceptions.php',
    ];
    if (isset($files[$class])) {
        require_once __DIR__ . '/' . $files[$class];
    }
});
