<?php

// The client's tests, without PHPUnit: every function test_* of the files
// tests/*Test.php runs; the last line says "N passed, N failed". Exit 77
// when an extension or library the tests need is missing.

declare(strict_types=1);

$missing = [];
foreach (['curl', 'json'] as $ext) {
    if (!extension_loaded($ext)) {
        $missing[] = "the $ext extension (php-$ext)";
    }
}
if (!interface_exists('Psr\Http\Server\MiddlewareInterface')) {
    $missing[] = 'the PSR-15 interfaces (php-psr)';
}
const NYHOLM = '/usr/share/php/Nyholm/Psr7/autoload.php';
if (!is_file(NYHOLM)) {
    $missing[] = 'nyholm/psr7 (php-nyholm-psr7)';
}
if ($missing) {
    fwrite(STDERR, 'missing: ' . implode(', ', $missing) . "\n");
    exit(77);
}
require NYHOLM;
require __DIR__ . '/../src/autoload.php';
require __DIR__ . '/support.php';
ini_set('error_log', '/dev/null'); // the failure policy's log lines

foreach (glob(__DIR__ . '/*Test.php') as $file) {
    require $file;
}
$passed = $failed = 0;
foreach (get_defined_functions()['user'] as $fn) {
    if (!str_starts_with($fn, 'test_')) {
        continue;
    }
    $started = microtime(true);
    try {
        $fn();
        $passed++;
        printf("ok   %s (%.2fs)\n", $fn, microtime(true) - $started);
    } catch (\Throwable $e) {
        $failed++;
        printf("FAIL %s: %s\n%s\n", $fn, $e->getMessage(), $e->getTraceAsString());
    } finally {
        Cleanup::run();
    }
}
echo "$passed passed, $failed failed\n";
exit($failed > 0 ? 1 : 0);
