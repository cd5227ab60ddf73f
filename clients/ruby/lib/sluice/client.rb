# frozen_string_literal: true

require "json"
require "io/wait"
require "openssl"
require "socket"
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

    # The client sets +headers+ to the answer's header, a String of its
    # own, and its RateLimit fields are found there when first asked for:
    # finding them on every call was a tenth of the client's own work,
    # for fields only a middleware copying them onto a response reads.
    alias_method :member, :[] # Struct#[], which the wrappers below do not read through
    private :member
    remove_method :headers
    def headers
      h = member(:headers)
      return h unless h.is_a?(String)

      h = Sluice.ratelimit_fields(h)
      frozen? ? h : (self[:headers] = h)
    end

    # What reads every member reads the fields, not the header.
    %i[to_a deconstruct values to_h each each_pair inspect to_s hash [] dig values_at select filter
       deconstruct_keys].each do |name|
      define_method(name) do |*args, &block|
        headers
        super(*args, &block)
      end
    end

    # A frozen Decision could not keep its fields: they are found first.
    def freeze
      headers
      super
    end

    def ==(other)
      headers
      other.headers if other.is_a?(Decision)
      super
    end

    def eql?(other)
      headers
      other.headers if other.is_a?(Decision)
      super
    end

    # The wait in whole seconds, rounded up, for a Retry-After field.
    def retry_after_seconds
      [retry_after.to_f.ceil, 0].max
    end
  end

  # The RateLimit fields of the service's answers, to copy onto responses.
  FIELDS = { "ratelimit" => "RateLimit", "ratelimit-policy" => "RateLimit-Policy" }.freeze
  # Each as it is searched for in a lowered header: its name, with the
  # CRLF before it and its colon (RFC 9112 allows no space before it).
  FIELD_SEARCHES = FIELDS.to_h { |low, name| [name, "\r\n#{low}:"] }.freeze

  # The RateLimit fields ({name => value}, the last of each name wins) of
  # an answer's header, head: the answer up to its blank line, or all of
  # it.
  def self.ratelimit_fields(head)
    low = head.byteslice(0, head.index("\r\n\r\n") || head.bytesize).downcase
    FIELD_SEARCHES.each_with_object({}) do |(name, search), fields|
      i = low.rindex(search) or next
      i += search.bytesize
      fields[name] = head.byteslice(i, (low.index("\r\n", i) || low.bytesize) - i).strip
    end
  end
  # The most of an answer a client reads.
  MAX_ANSWER = 1 << 20

  # Counts the forks that made this process, in the child, by Ruby 3.1's
  # Process._fork (which every fork goes through: Kernel#fork,
  # Process.fork, IO.popen("-")). A connection kept from before a fork
  # is shared by parent and child, and each would read answers meant for
  # the other: a client drops the connections of its pool made before
  # the last fork (Client#checkout).
  module Forks
    @count = 0

    class << self
      attr_reader :count

      def forked
        @count += 1
      end
    end

    # Process._fork, counting in the child.
    module Hook
      def _fork
        pid = super
        Forks.forked if pid.zero?
        pid
      end
    end
    Process.singleton_class.prepend(Hook)
  end

  # Ends the calls that pass their deadline. A call's reads and writes
  # wait in the kernel with no timeout of their own: a timed wait
  # (IO.select or IO#wait_readable with a timeout) arms a kernel timer at
  # every wait, and that cost more CPU a call than all the client's own
  # work (clients/ruby/bench.rb, interleaved: 48-53 µs of CPU a call with
  # timed waits, 43-47 without, the bare round trip's 31-39). Instead one
  # thread per process wakes every tick and shuts down the socket of each
  # connection whose call is past its deadline, which ends the call's
  # wait at once; the call then raises TimedOut. A call so ends at most a
  # tick after its deadline: a tenth of the smallest timeout of the
  # process's clients, from 5 ms to 100 ms. The thread ticks only while
  # calls are made: once no call is under way it waits for the next
  # call, which wakes it (and starts it, on the first call and on the
  # first in the child of a fork, where it does not run).
  #
  # It holds the connections of the calls under way, from begin_call to
  # end_call, and no others. (It kept every connection in an
  # ObjectSpace::WeakMap until it was garbage: Debian 12's Ruby 3.1.2
  # crashed in its garbage collector, "[BUG] try to mark T_NONE object",
  # in this suite's watchdog test.) In the child of a fork it forgets the
  # parent's calls: they are not this process's, and their sockets are
  # shared with the parent, which may finish them and use them again.
  module Watchdog
    @calling = {}.compare_by_identity # the connections of the calls under way
    @forks = 0 # Forks.count when @calling was last this process's
    @lock = Mutex.new
    @woken = ConditionVariable.new
    @tick = 0.1
    @thread = nil
    @awake = false

    class << self
      attr_reader :tick

      # Shortens the tick for calls bounded by timeout seconds.
      def watch(timeout)
        @lock.synchronize do
          @tick = timeout / 10 if timeout / 10 < @tick
          @tick = 0.005 if @tick < 0.005
        end
      end

      # Says a call of conn begins, its deadline already set; wakes the
      # thread if it waits for calls, starts it if it does not run.
      # Without the lock: a Hash's store and delete are each one step
      # for Ruby's other threads, and the lock here and in end_call cost
      # 2.1k instructions a call (count.rb: 34.6k of the client's own
      # against 32.5k). The order makes up for it: a call adds its
      # connection and then reads @awake; rest clears @awake and then
      # looks for a call under way; one of the two sees the other's
      # write.
      def begin_call(conn)
        if @forks != Forks.count
          @calling.clear
          @forks = Forks.count
        end
        @calling[conn] = true
        wake unless @awake && @thread.alive?
      end

      # Says the call of conn has ended.
      def end_call(conn)
        @calling.delete(conn)
      end

      private

      # Starts the thread if it does not run, and wakes it if it rests.
      def wake
        @lock.synchronize do
          @thread = Thread.new { run } unless @thread&.alive?
          @awake = true
          @woken.signal
        end
      end

      def run
        Thread.current.name = "sluice-watchdog"
        Thread.current.report_on_exception = false
        loop do
          sleep @tick
          now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          # A copy of the keys, walked while calls add and remove theirs
          # (without the lock: see begin_call; keys is one step for the
          # other threads).
          conns = @calling.keys
          conns.each { |c| c.expire(now) }
          rest
        rescue StandardError
          nil # a tick that failed must not end the watch
        end
      end

      # Waits for a call unless one is under way (see begin_call for the
      # order); a call's wake waits for the lock the wait releases.
      def rest
        @lock.synchronize do
          @awake = false
          if @calling.empty?
            @woken.wait(@lock)
          else
            @awake = true
          end
        end
      end
    end
  end

  # One kept-alive HTTP/1.1 connection, spoken directly on a socket:
  # net/http's own work per request cost several times the round trip to
  # sluice serve. A call's reads and writes end at its deadline, by the
  # Watchdog.
  class Connection
    class Stale < StandardError; end
    class TimedOut < StandardError; end

    def initialize(uri, timeout)
      sock = Socket.tcp(uri.host, uri.port, connect_timeout: timeout)
      sock.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
      if uri.scheme == "https"
        sock = OpenSSL::SSL::SSLSocket.new(sock, OpenSSL::SSL::SSLContext.new.tap(&:set_params))
        sock.hostname = uri.host
        sock.sync_close = true
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
        loop do
          r = sock.connect_nonblock(exception: false)
          break unless %i[wait_readable wait_writable].include?(r)

          left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
          ready = r == :wait_readable ? sock.to_io.wait_readable(left) : sock.to_io.wait_writable(left)
          raise TimedOut if left <= 0 || !ready
        end
        sock.post_connection_check(uri.host)
      end
      @sock = sock
      @buf = String.new # binary, as the reads
      # Reads land here: a new 64 KiB string per read made the garbage
      # collector run, major collections included, every few hundred calls.
      @chunk = String.new(capacity: 65_536, encoding: Encoding::BINARY)
      @deadline = nil # the call's, while one is made
      Watchdog.watch(timeout)
    end

    def close
      @sock.close
    rescue IOError, SystemCallError
      nil
    end

    # Closes this process's descriptor of a connection made before a
    # fork, which the other process keeps using: not the TLS session,
    # whose close_notify would end it for the other process too.
    def abandon
      @sock.to_io.close
    rescue IOError, SystemCallError
      nil
    end

    # Shuts the socket down if a call is past its deadline at now (the
    # Watchdog's tick), which ends the call's wait. A call that ended
    # meanwhile leaves a connection whose next call finds it closed, as
    # if the service had closed it while idle (Stale: tried again).
    def expire(now)
      d = @deadline
      @sock.to_io.shutdown(Socket::SHUT_RDWR) if d && d <= now
    rescue IOError, SystemCallError
      nil
    end

    # What exchange searches for in the answer's bytes, binary as they
    # are: given strings of two encodings, a String method first checks
    # that they are compatible (0.5k instructions a call, count.rb).
    EOH = "\r\n\r\n".b.freeze
    CRLF = "\r\n".b.freeze
    CONTENT_LENGTH = "\r\ncontent-length:".b.freeze
    TRANSFER_ENCODING = "\r\ntransfer-encoding:".b.freeze
    CONNECTION = "\r\nconnection:".b.freeze

    # A status line; its code is bytes 9 to 11.
    STATUS = %r{\AHTTP/1\.\d \d{3}[^\n]*?(?:\r\n|\z)}

    # The last answer's status, its header (a String of its own, which
    # may run on into the body: Sluice.ratelimit_fields reads it), and
    # whether the connection may be kept.
    attr_reader :status, :header, :keep

    # Sends request and reads the answer before deadline; returns its body
    # (status, header and keep are read from the connection: an array
    # of four a call cost more than the three readers). An error of the
    # socket after the deadline is the Watchdog's: TimedOut.
    def round_trip(request, deadline)
      @deadline = deadline
      Watchdog.begin_call(self)
      exchange(request)
    rescue Stale, IOError, SystemCallError, OpenSSL::SSL::SSLError
      raise TimedOut if Process.clock_gettime(Process::CLOCK_MONOTONIC) >= deadline

      raise
    ensure
      @deadline = nil
      Watchdog.end_call(self)
    end

    private

    def exchange(request)
      @buf.clear
      begin
        @sock.write(request)
        more(true)
      rescue Errno::ECONNRESET, Errno::EPIPE => e
        raise Stale, e.message
      end
      until (eoh = @buf.index(EOH))
        raise ArgumentError, "an answer header of more than 64 KiB" if @buf.bytesize > 65_536

        more(false)
      end
      # STATUS is matched in @buf, not in a copy of the header: a status
      # line that ends the header ends there at the blank line's CRLF.
      raise ArgumentError, "answered #{@buf.byteslice(0, [eoh, 100].min).inspect}, not HTTP" unless STATUS.match?(@buf)

      # The fields the connection needs are searched for in the lowered
      # header (a loop over every line, each split, stripped and lowered,
      # was the most of its own cost); the last of each wins. The
      # length's value is read from @buf, where the header is not
      # lowered. The RateLimit fields are left to the Decision.
      low = @buf.byteslice(0, eoh)
      low.downcase!
      length = (v = field(low, @buf, CONTENT_LENGTH)) && Integer(v, 10)
      chunked = low.include?(TRANSFER_ENCODING) && field(low, low, TRANSFER_ENCODING).strip == "chunked"
      keep = !low.include?(CONNECTION) || field(low, low, CONNECTION).strip != "close"
      @status = status = (@buf.getbyte(9) * 100) + (@buf.getbyte(10) * 10) + @buf.getbyte(11) - (48 * 111) # STATUS: digits
      @keep = keep
      if !chunked && length && @buf.bytesize - eoh - 4 == length && length <= MAX_ANSWER
        # The whole answer came in one read: it becomes the header, frozen
        # so that the body, its tail, shares its bytes, and reads go on
        # in a new buffer (no copy of the header for the Decision).
        @header = @buf.freeze
        @buf = String.new
        return @header.byteslice(eoh + 4, length).force_encoding(Encoding::UTF_8)
      end
      @header = @buf.byteslice(0, eoh)
      @buf = @buf.byteslice(eoh + 4, @buf.bytesize)
      body = if chunked
               read_chunked
             elsif length
               raise ArgumentError, "an answer of more than 1 MiB" if length > MAX_ANSWER || length.negative?

               take(length)
             elsif [204, 304].include?(status)
               +""
             else
               keep = false
               read_to_end
             end
      @keep = false unless keep && @buf.empty?
      body.force_encoding(Encoding::UTF_8)
    end

    # The value in head of the last field whose search (see
    # FIELD_SEARCHES) is in low, head lowered; nil when there is none.
    def field(low, head, search)
      i = low.rindex(search) or return nil
      i += search.bytesize
      head.byteslice(i, (low.index(CRLF, i) || low.bytesize) - i)
    end

    # Reads what there is into @buf, waiting as long as it takes (the
    # Watchdog ends a wait past the call's deadline); a connection closed
    # before the first read of an answer is Stale.
    def more(first)
      @buf << @sock.readpartial(65_536, @chunk)
      raise ArgumentError, "an answer of more than 1 MiB" if @buf.bytesize > MAX_ANSWER + 65_536
    rescue EOFError
      raise Stale, "the service closed the connection" if first && @buf.empty?

      raise EOFError, "the answer ended early"
    end

    def line
      until (i = @buf.index(CRLF))
        more(false)
      end
      l = @buf.byteslice(0, i)
      @buf = @buf.byteslice(i + 2..)
      l
    end

    def take(n)
      more(false) while @buf.bytesize < n
      data = @buf.byteslice(0, n)
      @buf = @buf.byteslice(n..)
      data
    end

    def read_chunked
      body = +"".b
      loop do
        size = Integer(line.split(";")[0].strip, 16)
        if size.zero?
          nil while line != ""
          return body
        end
        raise ArgumentError, "an answer of more than 1 MiB" if body.bytesize + size > MAX_ANSWER

        body << take(size)
        line
      end
    end

    def read_to_end
      loop { more(false) }
    rescue EOFError
      data = @buf
      @buf = String.new
      data
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
    NET_ERRORS = [IOError, SystemCallError, SocketError, OpenSSL::SSL::SSLError, EOFError].freeze

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
      @heads = {} # path => the request up to its Content-Length
      @lock = Mutex.new
      @forks = Forks.count # the forks the pool's connections were made after
    end

    # Says whether +cost+ units of +key+ would fit under +rule+, taking
    # nothing (the seed's check).
    def check(rule, key, cost: 1)
      decide("/v1/check", rule, body(rule, key, cost, PEEK))
    end

    # Counts +cost+ whether or not it fits (negative gives back), and says
    # whether +key+ may still act (the seed's insert).
    def insert(rule, key, cost: 1)
      decide("/v1/insert", rule, body(rule, key, cost))
    end

    # Takes +cost+ if it fits (the seed's checked insert). With a block,
    # runs it when allowed and returns its value, or raises RateLimited.
    def checked_insert(rule, key, cost: 1)
      d = decide("/v1/check", rule, body(rule, key, cost))
      return d unless block_given?
      raise RateLimited, d unless d.allowed

      yield d
    end

    def reserve(rule, key, id, cost: 1)
      decide("/v1/reserve", rule, rule: rule, key: key, cost: cost, id: id)
    end

    def commit(rule, key, id, cost: 1)
      call("/v1/commit", rule, { rule: rule, key: key, cost: cost, id: id })
    end

    def refund(rule, key, id, cost: 1)
      call("/v1/refund", rule, { rule: rule, key: key, cost: cost, id: id })
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
      forget_pool if @forks != Forks.count
      idle = @lock.synchronize { @idle.slice!(0..) }
      idle.each(&:close)
    end

    # Returns key as the service is sent it: any bytes, invalid UTF-8
    # becoming U+FFFD, one per byte, as the Go client's keys do.
    def self.normalize_key(key)
      s = key.to_s
      # A key already valid UTF-8 (the usual) is sent as it is, not copied.
      return s if s.encoding == Encoding::UTF_8 && s.valid_encoding?

      s = s.dup.force_encoding(Encoding::UTF_8)
      s.valid_encoding? ? s : s.scrub { |bytes| "\uFFFD" * bytes.bytesize }
    end

    # What JSON escapes in a string, and the escape JSON.generate writes
    # for each.
    ESCAPE = /["\\\x00-\x1f]/
    ESCAPES = (0..0x1f).to_h { |c| [c.chr, format("\\u%04x", c)] }
                       .merge("\b" => "\\b", "\t" => "\\t", "\n" => "\\n", "\f" => "\\f", "\r" => "\\r",
                              '"' => '\\"', "\\" => "\\\\").freeze

    # Returns s, valid UTF-8 or ASCII, as it is written between the
    # quotes of a JSON string; s itself when nothing needs an escape.
    def self.escape(s)
      ESCAPE.match?(s) ? s.gsub(ESCAPE, ESCAPES) : s
    end

    private

    # The end of the body of a check that takes nothing.
    PEEK = ',"peek":true}'

    # The JSON body of a decision about +key+, ending in +tail+: as
    # JSON.generate writes it, but written in one interpolation when the
    # rule is ASCII and the cost an Integer, as they are in practice
    # (JSON.generate's state and walk of a hash of keywords were 12k
    # instructions a call, a fifth of the client's own work).
    def body(rule, key, cost, tail = "}")
      key = Client.normalize_key(key)
      unless rule.is_a?(String) && rule.ascii_only? && cost.is_a?(Integer)
        fields = { rule: rule, key: key, cost: cost }
        fields[:peek] = true if tail == PEEK
        return JSON.generate(fields)
      end
      %({"rule":"#{Client.escape(rule)}","key":"#{Client.escape(key)}","cost":#{cost}#{tail})
    end

    def decide(path, rule, body)
      call(path, rule, body)
    rescue Unavailable => e
      failed(rule, e)
    end

    # The pool's lock is taken and released around one Array call, which
    # cannot raise, so without synchronize's block (a third of the pool's
    # cost).
    def checkout
      forget_pool if @forks != Forks.count
      @lock.lock
      conn = @idle.pop
      @lock.unlock
      conn
    end

    # Drops the pool's connections, made before this process was forked
    # (see Forks).
    def forget_pool
      @lock.synchronize do
        @idle.slice!(0..).each(&:abandon)
        @forks = Forks.count
      end
    end

    def checkin(conn)
      @lock.lock
      kept = @idle.size < @max_idle && @idle.push(conn)
      @lock.unlock
      conn.close unless kept
    end

    # Posts body (its JSON, or a Hash) to path and returns the answer's
    # Decision (nil for a want of 204): the decision is made here, not by
    # each caller, which spares two arrays a call (a return of two
    # values, and its splat).
    def call(path, rule, body, want: 200)
      if body.is_a?(String)
        payload = body
      else
        body[:key] = Client.normalize_key(body[:key]) if body.key?(:key)
        payload = JSON.generate(body)
      end
      head = @heads[path] ||= "POST #{@uri.path.chomp("/")}#{path} HTTP/1.1\r\nHost: #{@uri.host}:#{@uri.port}\r\n" \
                              "Content-Type: application/json\r\nContent-Length: ".b.freeze
      request = "#{head}#{payload.bytesize}\r\n\r\n#{payload}" # one string, not four
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + @timeout
      # A while loop, not a block: a return from within a block unwinds
      # the stack as an exception does, a few µs a call.
      attempt = 0
      while attempt < 2
        attempt += 1
        conn = checkout
        reused = !conn.nil?
        begin
          conn ||= Connection.new(@uri, @timeout)
          data = conn.round_trip(request, deadline)
        rescue Connection::Stale => e
          conn&.close
          # A kept-alive connection the service closed while it was idle.
          next if reused && attempt == 1

          raise Unavailable, "sluice: #{@url}#{path}: #{e.message}"
        rescue Connection::TimedOut
          conn&.close
          raise Unavailable, "sluice: #{@url}#{path}: no answer within #{@timeout}s"
        rescue *NET_ERRORS, ArgumentError => e
          conn&.close
          raise Unavailable, "sluice: #{@url}#{path}: #{e.message}"
        end
        # Read before the connection goes back to the pool, to another thread.
        status = conn.status
        header = conn.header
        conn.keep ? checkin(conn) : conn.close
        return answer(path, rule, status, header, data, want)
      end
    end

    def answer(path, rule, status, header, data, want)
      if status == want
        return if want == 204

        # (valid_encoding? first: a match raises on bytes not UTF-8.)
        m = data.valid_encoding? && USUAL.match(data)
        return usual(m, header) if m

        a = begin
          # JSON.parse(data), without the two hashes of its options.
          JSON::Parser.new(data).parse
        rescue JSON::ParserError
          nil
        end
        raise Unavailable, "sluice: #{@url}#{path} answered #{data[0, 200].inspect}, not the service's JSON" unless a.is_a?(Hash)

        return decision(a, header, path)
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

    def decision(a, header, path)
      allowed = a["allowed"]
      raise Unavailable, "sluice: #{@url}#{path} answered no decision" unless allowed == true || allowed == false # no array a call

      # Decision.new with keywords builds a hash and walks it, twice the
      # cost of the rest of this method: the members are set one by one
      # instead (error stays nil). The service's numbers come as the
      # members' types (but a whole number of seconds as an Integer):
      # only the others go through num.
      d = Decision.allocate
      d.allowed = allowed
      d.rule = a["rule"].to_s
      d.limit = (v = a["limit"]).is_a?(Integer) ? v : num(v).to_i
      d.policy = a["policy"].to_s
      d.remaining = (v = a["remaining"]).is_a?(Integer) ? v : num(v).to_i
      d.reset_after = (v = a["reset_after"]).is_a?(Float) ? v : num(v)
      d.retry_after = (v = a["retry_after"]).is_a?(Float) ? v : num(v)
      d.shadowed = a["shadowed"] == true
      d.guard = a["guard"].to_s
      d.duplicate = a["duplicate"] == true
      d.headers = header # its RateLimit fields found when asked: see Decision#headers
      d
    end

    # The service's usual answer to a check, as its encoder writes it: the
    # fields of wire.CheckResponse in their order, no others, strings
    # without escapes, JSON's numbers. Read by this one anchored match
    # rather than by JSON::Parser's hash and strings, the client's own
    # work fell by a quarter (count.rb: 41.3k to 31.0k instructions a
    # call); any other answer is parsed as JSON, and a test holds the two
    # readings equal.
    NUMBER = '-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?'
    USUAL = /\A\{"allowed":(true|false),"rule":"([^"\\\x00-\x1f]*)","limit":(-?\d+),"policy":"([^"\\\x00-\x1f]*)",
              "remaining":(-?\d+),"reset_after":(#{NUMBER}),"retry_after":(#{NUMBER})\}\n?\z/x

    # The Decision of an answer that matched USUAL (m), as decision reads
    # the same answer parsed.
    def usual(m, header)
      d = Decision.allocate
      d.allowed = m[1] == "true"
      d.rule = m[2]
      d.limit = m[3].to_i
      d.policy = m[4]
      d.remaining = m[5].to_i
      d.reset_after = m[6].to_f
      d.retry_after = m[7].to_f
      d.shadowed = d.duplicate = false
      d.guard = ""
      d.headers = header
      d
    end

    # A number of the answer as a Float; 0.0 for anything else.
    def num(value)
      value.is_a?(Numeric) ? value.to_f : 0.0
    end
  end
end
