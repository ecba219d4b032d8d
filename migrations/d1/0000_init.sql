CREATE TABLE `conversations` (
	`id` text PRIMARY KEY NOT NULL,
	`user_id` text NOT NULL,
	`last_used_model` text NOT NULL,
	`last_used_provider` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`last_message_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	`message_count` integer DEFAULT 0 NOT NULL,
	`topic_summary` text,
	`last_response_id` text
);
--> statement-breakpoint
CREATE INDEX `conversations_user_id_idx` ON `conversations` (`user_id`,`last_message_at`);--> statement-breakpoint
CREATE TABLE `prompts` (
	`prompt_id` text NOT NULL,
	`version` integer NOT NULL,
	`prompt` text NOT NULL,
	`variables` text NOT NULL,
	`is_default` integer DEFAULT false NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	PRIMARY KEY(`prompt_id`, `version`)
);
--> statement-breakpoint
CREATE TABLE `quota_subjects` (
	`limiter` text NOT NULL,
	`subject` text NOT NULL,
	`next_reset_at` integer NOT NULL,
	PRIMARY KEY(`limiter`, `subject`)
);
--> statement-breakpoint
CREATE INDEX `quota_subjects_next_reset_at_idx` ON `quota_subjects` (`next_reset_at`);--> statement-breakpoint
CREATE TABLE `responses` (
	`response_id` text PRIMARY KEY NOT NULL,
	`conversation_id` text NOT NULL,
	`user_id` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL
);
--> statement-breakpoint
CREATE INDEX `responses_conversation_id_idx` ON `responses` (`conversation_id`);--> statement-breakpoint
CREATE TABLE `settings` (
	`key` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL
);
--> statement-breakpoint
CREATE TABLE `stream_requests` (
	`request_id` text PRIMARY KEY NOT NULL,
	`conversation_id` text NOT NULL,
	`user_id` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL
);
--> statement-breakpoint
CREATE INDEX `stream_requests_conversation_id_idx` ON `stream_requests` (`conversation_id`);--> statement-breakpoint
CREATE TABLE `token_usage` (
	`user_id` text NOT NULL,
	`provider` text NOT NULL,
	`model` text NOT NULL,
	`input_tokens` integer DEFAULT 0 NOT NULL,
	`output_tokens` integer DEFAULT 0 NOT NULL,
	`updated_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) NOT NULL,
	PRIMARY KEY(`user_id`, `provider`, `model`)
);
