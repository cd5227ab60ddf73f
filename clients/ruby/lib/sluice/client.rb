# frozen_string_literal: true

require "json"
require "net/http"
require "uri"

module Sluice
  VERSION = "0.1.0"

  # Base of the client's errors.
  class Error < StandardError; end

  # The service did not decide: it could not be reached, did not answer
  # within the timeout, answered something that is not its JSON, or its
  # store failed. Decisions come back as the failure policy's, with this
  # error as their +error+; calls that settle raise it.
  class Unavailable < Error; end

  # The service refused the request (a 4xx): an unknown rule, a cost above
  # the rule's burst, an unknown reservation. The message names the rule.
  class InvalidRequest < Error
    attr_reader :status, :rule

    def initialize(message, status, rule)
      super(message)
      @status = status
      @rule = rule
    end
  end

  # A checked insert with a block found the key over its limit.
  class RateLimited < Error
    attr_reader :decision

    def initialize(decision)
      @decision = decision
      super("sluice: rule '#{decision.rule}' over its limit #{decision.policy}; retry in #{decision.retry_after_seconds}s")
    end

    # The wait in seconds.
    def retry_after
      decision.retry_after
    end
  end

  # The service's answer: times are seconds; +headers+ are the RateLimit
  # and RateLimit-Policy fields it sent; +error+ is set when the failure
  # policy decided.
  Decision = Struct.new(:allowed, :rule, :limit, :policy, :remaining, :reset_after, :retry_after,
                        :shadowed, :guard, :duplicate, :headers, :error, keyword_init: true) do
    alias_method :allowed?, :allowed

    # The wait in whole seconds, rounded up, for a Retry-After field.
    def retry_after_seconds
      [retry_after.to_f.ceil, 0].max
    end
  end

  # A client of sluice serve at +url+. Each call is one round trip on a
  # kept-alive connection from a small pool (so threads do not share
  # one), bounded by +timeout+ seconds to connect, write and read. When
  # the service does not decide, calls that decide return the decision of
  # +failure+: :open allows, :closed denies for +fail_retry_after+
  # seconds, with +error+ set (and a warning to +logger+, if given).
  # Safe for use by many threads.
  class Client
    FIELDS = { "ratelimit" => "RateLimit", "ratelimit-policy" => "RateLimit-Policy" }.freeze
    MAX_ANSWER = 1 << 20
    # Given in full, so that net/http neither adds its defaults nor wraps
    # the answer in a decompressor: each costs more than a decision.
    HEADERS = { "Content-Type" => "application/json", "Accept" => "application/json",
                "Accept-Encoding" => "identity", "User-Agent" => "sluice-ruby/#{VERSION}" }.freeze
    NET_ERRORS = [IOError, SystemCallError, SocketError, Timeout::Error, Net::HTTPBadResponse,
                  Net::ProtocolError, OpenSSL::SSL::SSLError, EOFError].freeze

    attr_reader :url, :timeout, :failure

    def initialize(url = "http://127.0.0.1:8080", timeout: 0.5, failure: :open, fail_retry_after: 1.0, max_idle: 16, logger: nil)
      @uri = URI(url)
      raise ArgumentError, "sluice: url #{url.inspect}: want http://host:port" unless %w[http https].include?(@uri.scheme) && @uri.host
      raise ArgumentError, "sluice: failure #{failure.inspect}: want :open or :closed" unless %i[open closed].include?(failure.to_sym)
      raise ArgumentError, "sluice: timeout must be positive seconds" unless timeout.to_f.positive?

      @url = url.chomp("/")
      @timeout = timeout.to_f
      @failure = failure.to_sym
      @fail_retry_after = fail_retry_after.to_f
      @max_idle = max_idle
      @logger = logger
      @idle = []
      @lock = Mutex.new
    end

    # Says whether +cost+ units of +key+ would fit under +rule+, taking
    # nothing (the seed's check).
    def check(rule, key, cost: 1)
      decide("/v1/check", rule, rule: rule, key: key, cost: cost, peek: true)
    end

    # Counts +cost+ whether or not it fits (negative gives back), and says
    # whether +key+ may still act (the seed's insert).
    def insert(rule, key, cost: 1)
      decide("/v1/insert", rule, rule: rule, key: key, cost: cost)
    end

    # Takes +cost+ if it fits (the seed's checked insert). With a block,
    # runs it when allowed and returns its value, or raises RateLimited.
    def checked_insert(rule, key, cost: 1)
      d = decide("/v1/check", rule, rule: rule, key: key, cost: cost)
      return d unless block_given?
      raise RateLimited, d unless d.allowed

      yield d
    end

    def reserve(rule, key, id, cost: 1)
      decide("/v1/reserve", rule, rule: rule, key: key, cost: cost, id: id)
    end

    def commit(rule, key, id, cost: 1)
      decision(*call("/v1/commit", rule, { rule: rule, key: key, cost: cost, id: id }), "/v1/commit")
    end

    def refund(rule, key, id, cost: 1)
      decision(*call("/v1/refund", rule, { rule: rule, key: key, cost: cost, id: id }), "/v1/refund")
    end

    def report(rule, key, id, outcome: "failure", cost: 1)
      decide("/v1/report", rule, rule: rule, key: key, cost: cost, id: id, outcome: outcome)
    end

    # Forgets +key+'s state under +rule+.
    def reset(rule, key)
      call("/v1/reset", rule, { rule: rule, key: key }, want: 204)
      nil
    end

    # The failure policy's decision for +rule+ when the service did not decide.
    def failed(rule, error)
      @logger&.warn("#{error.message}; failing #{@failure}")
      open = @failure == :open
      Decision.new(allowed: open, rule: rule, limit: 0, policy: "", remaining: 0, reset_after: 0.0,
                   retry_after: open ? 0.0 : @fail_retry_after, shadowed: false, guard: "", duplicate: false,
                   headers: {}, error: error)
    end

    def close
      idle = @lock.synchronize { @idle.slice!(0..) }
      idle.each { |h| h.finish if h.started? }
    end

    # Returns key as the service is sent it: any bytes, invalid UTF-8
    # becoming U+FFFD, one per byte, as the Go client's keys do.
    def self.normalize_key(key)
      s = key.to_s.dup.force_encoding(Encoding::UTF_8)
      s.valid_encoding? ? s : s.scrub { |bytes| "\uFFFD" * bytes.bytesize }
    end

    private

    def decide(path, rule, body)
      decision(*call(path, rule, body), path)
    rescue Unavailable => e
      failed(rule, e)
    end

    def checkout
      @lock.synchronize { @idle.pop }&.then { |h| [h, true] } || [new_http, false]
    end

    def checkin(http)
      @lock.synchronize do
        return @idle.push(http) if @idle.size < @max_idle
      end
      http.finish if http.started?
    end

    def new_http
      h = Net::HTTP.new(@uri.host, @uri.port)
      h.use_ssl = @uri.scheme == "https"
      h.open_timeout = h.read_timeout = h.write_timeout = @timeout
      h.ssl_timeout = @timeout if h.use_ssl?
      h.keep_alive_timeout = 60
      h.max_retries = 0
      h
    end

    def call(path, rule, body, want: 200)
      body[:key] = Client.normalize_key(body[:key]) if body.key?(:key)
      payload = JSON.generate(body)
      req = Net::HTTP::Post.new(@uri.path.chomp("/") + path, HEADERS)
      req.body = payload
      2.times do |attempt|
        http, reused = checkout
        begin
          http.start unless http.started?
          resp = http.request(req)
        rescue EOFError, Errno::ECONNRESET, Errno::EPIPE => e
          http.finish if http.started?
          # A kept-alive connection the service closed while it was idle.
          next if reused && attempt.zero?

          raise Unavailable, "sluice: #{@url}#{path}: #{e.message}"
        rescue *NET_ERRORS => e
          http.finish if http.started?
          msg = e.is_a?(Timeout::Error) ? "no answer within #{@timeout}s" : e.message
          raise Unavailable, "sluice: #{@url}#{path}: #{msg}"
        end
        checkin(http)
        return answer(path, rule, resp, want)
      end
    end

    def answer(path, rule, resp, want)
      status = resp.code.to_i
      data = resp.body.to_s
      raise Unavailable, "sluice: #{@url}#{path}: an answer of more than 1 MiB" if data.bytesize > MAX_ANSWER

      headers = {}
      FIELDS.each { |name, canon| headers[canon] = resp[name] if resp[name] }
      if status == want
        return [{}, headers] if want == 204

        a = begin
          JSON.parse(data)
        rescue JSON::ParserError
          nil
        end
        raise Unavailable, "sluice: #{@url}#{path} answered #{data[0, 200].inspect}, not the service's JSON" unless a.is_a?(Hash)

        return [a, headers]
      end
      detail = begin
        e = JSON.parse(data)
        e.is_a?(Hash) ? (e["detail"] || e["error"]).to_s : ""
      rescue JSON::ParserError
        ""
      end
      detail = data[0, 200].strip if detail.empty?
      msg = "sluice: rule '#{rule}': #{path}: #{status}: #{detail}"
      raise InvalidRequest.new(msg, status, rule) if status >= 400 && status < 500 && ![408, 429].include?(status)

      raise Unavailable, msg
    end

    def decision(a, headers, path)
      raise Unavailable, "sluice: #{@url}#{path} answered no decision" unless [true, false].include?(a["allowed"])

      num = ->(k) { a[k].is_a?(Numeric) ? a[k].to_f : 0.0 }
      Decision.new(allowed: a["allowed"], rule: a["rule"].to_s, limit: num.call("limit").to_i, policy: a["policy"].to_s,
                   remaining: num.call("remaining").to_i, reset_after: num.call("reset_after"),
                   retry_after: num.call("retry_after"), shadowed: a["shadowed"] == true, guard: a["guard"].to_s,
                   duplicate: a["duplicate"] == true, headers: headers, error: nil)
    end
  end
end
