CREATE TABLE "conversations" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"last_used_model" text NOT NULL,
	"last_used_provider" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_message_at" timestamp with time zone DEFAULT now() NOT NULL,
	"message_count" integer DEFAULT 0 NOT NULL,
	"topic_summary" text,
	"last_response_id" text
);
--> statement-breakpoint
CREATE TABLE "prompts" (
	"prompt_id" text NOT NULL,
	"version" integer NOT NULL,
	"prompt" text NOT NULL,
	"variables" jsonb NOT NULL,
	"is_default" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "prompts_prompt_id_version_pk" PRIMARY KEY("prompt_id","version")
);
--> statement-breakpoint
CREATE TABLE "quota_subjects" (
	"limiter" text NOT NULL,
	"subject" text NOT NULL,
	"next_reset_at" bigint NOT NULL,
	CONSTRAINT "quota_subjects_limiter_subject_pk" PRIMARY KEY("limiter","subject")
);
--> statement-breakpoint
CREATE TABLE "responses" (
	"response_id" text PRIMARY KEY NOT NULL,
	"conversation_id" text NOT NULL,
	"user_id" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "settings" (
	"key" text PRIMARY KEY NOT NULL,
	"value" text NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "stream_requests" (
	"request_id" text PRIMARY KEY NOT NULL,
	"conversation_id" text NOT NULL,
	"user_id" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "token_usage" (
	"user_id" text NOT NULL,
	"provider" text NOT NULL,
	"model" text NOT NULL,
	"input_tokens" bigint DEFAULT 0 NOT NULL,
	"output_tokens" bigint DEFAULT 0 NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "token_usage_user_id_provider_model_pk" PRIMARY KEY("user_id","provider","model")
);
--> statement-breakpoint
CREATE INDEX "conversations_user_id_idx" ON "conversations" USING btree ("user_id","last_message_at");--> statement-breakpoint
CREATE INDEX "quota_subjects_next_reset_at_idx" ON "quota_subjects" USING btree ("next_reset_at");--> statement-breakpoint
CREATE INDEX "responses_conversation_id_idx" ON "responses" USING btree ("conversation_id");--> statement-breakpoint
CREATE INDEX "stream_requests_conversation_id_idx" ON "stream_requests" USING btree ("conversation_id");